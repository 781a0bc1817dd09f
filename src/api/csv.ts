// RFC 4180 CSV: a header line, then one line per row; null and absent values are empty cells.
// A cell that could start a spreadsheet formula (=, +, -, @ followed by text) is quoted with a
// leading apostrophe, as OWASP advises for CSV exports; numbers are written as they are.

const FORMULA = /^[=+\-@\t\r]/;

function cell(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return String(v);
  let s = String(v);
  if (FORMULA.test(s)) s = `'${s}`;
  return /[",\r\n']/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function toCsv(columns: string[], rows: Record<string, unknown>[]): string {
  const lines = [columns.join(",")];
  for (const row of rows) lines.push(columns.map((c) => cell(row[c])).join(","));
  return `${lines.join("\r\n")}\r\n`;
}
