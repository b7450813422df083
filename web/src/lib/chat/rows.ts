/** A task's result as the table it is, when it is one: a statement followed to its end answers
 * with its columns and rows (ops' SqlResult), which read better as a table than as JSON. */

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
