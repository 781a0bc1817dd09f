// RFC 4180 CSV: a header line, then one line per row; null and absent values are empty cells.
// A text that a spreadsheet could read as a formula (=, +, -, @, tab or carriage return first)
// gets a leading apostrophe, as OWASP advises for CSV exports; numbers are written as they are.
// Spreadsheets split by the locale's separator, not ours: German or French Excel splits
// `x;=cmd|…` at `;`, quotes or not, and the part after it is a cell of its own. So every part
// that a common separator (`,`, `;`, tab) or a line break would start is neutralised the same way.

/** A formula's first character, after what a spreadsheet skips (spaces, quotes). */
const FORMULA = /^[ "]*[=+\-@\t\r]/;
/** A separator or line break that a formula follows: a cell starts there in some locale. */
const INNER_FORMULA = /[,;\t\r\n](?=[ "]*[=+\-@\t\r])/g;

function cell(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return String(v);
  let s = String(v).replace(INNER_FORMULA, "$&'");
  if (FORMULA.test(s)) s = `'${s}`;
  return /[",\r\n']/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function toCsv(columns: string[], rows: Record<string, unknown>[]): string {
  const lines = [columns.join(",")];
  for (const row of rows) lines.push(columns.map((c) => cell(row[c])).join(","));
  return `${lines.join("\r\n")}\r\n`;
}
