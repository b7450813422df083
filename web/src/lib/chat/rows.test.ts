import { describe, expect, it } from "vitest";

import { cellText, csvOf, resultRows, rowsOf } from "./rows.ts";
import type { ToolCard, TurnView } from "./types.ts";

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

describe("csvOf", () => {
  it("writes a header and a CRLF line per row, quoting what needs it", () => {
    const table = { columns: ["status", "orders"], rows: [["paid", 12], ['said "hi", twice', null], ["a\nb", 0.5]], truncated: false };
    expect(csvOf(table)).toBe('status,orders\r\npaid,12\r\n"said ""hi"", twice",\r\n"a\nb",0.5\r\n');
  });

  it("writes a text cell a spreadsheet would run as text, and a negative number as a number", () => {
    const table = { columns: ["cell"], rows: [["=HYPERLINK(\"x\")"], ["+1"], ["-2+3"], ["@SUM(A1)"], ["\t=1"], [-5]], truncated: false };
    expect(csvOf(table).split("\r\n").slice(1, -1)).toEqual(["\"'=HYPERLINK(\"\"x\"\")\"", "'+1", "'-2+3", "'@SUM(A1)", "'\t=1", "-5"]);
  });
});

describe("resultRows", () => {
  const sql = { columns: ["status", "n"], rows: [{ status: "paid", n: 3 }], truncated: false };
  const card = (status: ToolCard["status"], output: unknown): ToolCard => ({
    id: String(Math.random()),
    tool: "superset_execute_sql",
    status,
    input: {},
    output,
    error: null,
    attempt: null,
    maxAttempts: null,
    retryable: null,
  });
  const view = (tools: ToolCard[], task: TurnView["task"] = null): TurnView => ({
    conversationId: null,
    model: null,
    routing: null,
    text: "",
    tools,
    confirm: null,
    denied: null,
    state: "success",
    taskId: null,
    task,
    errors: [],
    warnings: [],
  });

  it("takes the last call that answered with rows, directly or under its result", () => {
    expect(resultRows(view([card("ok", sql)]))?.rows).toEqual([["paid", 3]]);
    expect(resultRows(view([card("ok", { result: sql, status: "success" })]))?.columns).toEqual(["status", "n"]);
    const later = { ...sql, rows: [{ status: "open", n: 1 }] };
    expect(resultRows(view([card("ok", sql), card("ok", later)]))?.rows).toEqual([["open", 1]]);
  });

  it("skips a call that failed and one that found no rows, and reads a followed statement's task", () => {
    expect(resultRows(view([card("error", sql), card("ok", { dashboards: [] })]))).toBeNull();
    const task = { status: "success", progress: 100, result: sql, error: null } as unknown as TurnView["task"];
    expect(resultRows(view([card("ok", { task_id: "t1" })], task))?.rows).toEqual([["paid", 3]]);
  });
});
