import { describe, expect, it } from "vitest";

import { cellText, rowsOf } from "./rows.ts";

describe("rowsOf", () => {
  it("reads a statement's result as a table in its columns' order", () => {
    const result = {
      env_id: "dev",
      columns: ["region", "n"],
      rows: [
        { n: 3, region: "East" },
        { region: "West", n: null },
      ],
      row_count: 2,
      truncated: false,
    };
    expect(rowsOf(result)).toEqual({
      columns: ["region", "n"],
      rows: [
        ["East", 3],
        ["West", null],
      ],
      truncated: false,
    });
  });

  it("says a result cut at its limit was cut", () => {
    const rows = rowsOf({ columns: ["id"], rows: [{ id: 1 }], truncated: true });
    expect(rows?.truncated).toBe(true);
  });

  it("leaves anything else to show as it is", () => {
    expect(rowsOf({ backup_id: "b1", dashboards: ["Sales"] })).toBeNull();
    expect(rowsOf({ env_id: "dev", columns: [], rows: [] })).toBeNull(); // a statement with no rows
    expect(rowsOf({ columns: ["a"], rows: [[1]] })).toBeNull(); // rows not keyed by column
    expect(rowsOf(null)).toBeNull();
    expect(rowsOf([1, 2])).toBeNull();
  });

  it("writes a cell as text, a nested value as JSON", () => {
    expect([cellText("x"), cellText(2), cellText(null), cellText({ a: 1 }), cellText(false)]).toEqual([
      "x",
      "2",
      "",
      '{"a":1}',
      "false",
    ]);
  });
});
