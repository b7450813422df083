/** A statement's result as the table it is, when it is one: ops' SqlResult (columns and rows),
 * in a tool's result or in a task followed to its end, reads better as a table than as JSON,
 * and a person can take it away as CSV. */

import type { TurnView } from "./types.ts";

export interface Rows {
  columns: string[];
  rows: unknown[][];
  truncated: boolean;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The result's rows, in its columns' order; null when it is not rows (any other task's
 * result, or a statement that returned none: those show as they are). */
export function rowsOf(result: unknown): Rows | null {
  if (!isRecord(result) || !Array.isArray(result.columns) || !Array.isArray(result.rows)) return null;
  const columns = result.columns.map(String);
  if (columns.length === 0 || !result.rows.every(isRecord)) return null;
  const rows = (result.rows as Record<string, unknown>[]).map((row) => columns.map((column) => row[column] ?? null));
  return { columns, rows, truncated: result.truncated === true };
}

/** A cell as text: a value as it came, an object or list as JSON, nothing as an empty cell. */
export const cellText = (value: unknown): string =>
  value === null ? "" : typeof value === "object" ? JSON.stringify(value) : String(value);

/** The rows a turn found, for its CSV: the last call that answered with rows, or the statement
 * its task ran; null when the turn found none. A tool's result may hold them under ``result``
 * (a statement ops followed as a task within the call). */
export function resultRows(view: TurnView): Rows | null {
  for (const card of [...view.tools].reverse()) {
    if (card.status !== "ok") continue;
    const found = rowsOf(card.output) ?? (isRecord(card.output) ? rowsOf(card.output.result) : null);
    if (found) return found;
  }
  return view.task && !view.task.error ? rowsOf(view.task.result) : null;
}

// A spreadsheet runs a cell that starts with one of these (some skip a leading tab or carriage
// return first): such a cell is written after a single quote, as text — the services' CSV rule
// (libs/common csv_export.py), for a result's text cells hold whatever the database held. A
// number stays a number: -5 is a value, not a formula.
const FORMULA_STARTS = ["=", "+", "-", "@", "\t", "\r"];

function csvCell(value: unknown): string {
  let text = cellText(value);
  if (typeof value !== "number" && FORMULA_STARTS.some((start) => text.startsWith(start))) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** ``table`` as CSV (RFC 4180: a header line, CRLF, quoted where needed), every cell safe. */
export function csvOf(table: Rows): string {
  return [table.columns, ...table.rows].map((row) => row.map(csvCell).join(",") + "\r\n").join("");
}
