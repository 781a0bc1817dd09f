// Just enough reading of SQL text for the HTTP layer to behave like clickhouse-server: which
// statement kind it is, whether a second statement follows (refused over HTTP), which output
// format it names, and the simple `INSERT INTO t (cols) FORMAT X` shape that can take the
// engine's zero-copy insert path. Never used to rewrite a query.

/** Index after the comment or quoted literal starting at `i`, or `i` when there is none. */
function skipToken(sql: string, i: number): number {
  const c = sql[i];
  if (c === "-" && sql[i + 1] === "-") {
    const end = sql.indexOf("\n", i);
    return end === -1 ? sql.length : end + 1;
  }
  if (c === "/" && sql[i + 1] === "*") {
    const end = sql.indexOf("*/", i + 2);
    return end === -1 ? sql.length : end + 2;
  }
  if (c === "'" || c === '"' || c === "`") {
    let j = i + 1;
    while (j < sql.length) {
      if (sql[j] === "\\") j += 2;
      else if (sql[j] === c && sql[j + 1] === c) j += 2;
      else if (sql[j] === c) return j + 1;
      else j++;
    }
    return sql.length;
  }
  return i;
}

function skipBlank(sql: string, i: number): number {
  let j = i;
  for (;;) {
    while (j < sql.length && /\s/.test(sql[j] as string)) j++;
    const next = sql[j] === "'" || sql[j] === '"' || sql[j] === "`" ? j : skipToken(sql, j);
    if (next === j) return j;
    j = next;
  }
}

/** The first keyword, upper-cased: "SELECT", "INSERT", "SET", … ("" when there is none). */
export function firstKeyword(sql: string): string {
  let i = skipBlank(sql, 0);
  while (sql[i] === "(") i = skipBlank(sql, i + 1);
  return /^[A-Za-z]+/.exec(sql.slice(i, i + 32))?.[0].toUpperCase() ?? "";
}

/** Offset of a `;` that ends the first statement when another statement follows, else -1. */
export function secondStatementAt(sql: string): number {
  let i = 0;
  while (i < sql.length) {
    const next = skipToken(sql, i);
    if (next !== i) {
      i = next;
      continue;
    }
    if (sql[i] === ";") {
      let j = i + 1;
      for (;;) {
        j = skipBlank(sql, j);
        if (sql[j] !== ";") break;
        j++;
      }
      return j < sql.length ? i : -1;
    }
    i++;
  }
  return -1;
}

/** Whether `word` appears as a keyword-like token (a cheap over-approximation is fine). */
export function mentionsWord(sql: string, word: string): boolean {
  return new RegExp(`\\b${word}\\b`, "i").test(sql);
}

const TRAILING_FORMAT =
  /\bFORMAT\s+([A-Za-z][A-Za-z0-9_]*)\s*(?:SETTINGS\s[^;]*)?;?\s*(?:--[^\n]*)?\s*$/i;

/** The output format a query names in its own FORMAT clause, if any. */
export function trailingFormat(sql: string): string | undefined {
  return TRAILING_FORMAT.exec(sql)?.[1];
}

export interface SimpleInsert {
  table: string;
  columns?: string[];
  format: string;
}

const IDENT = "[A-Za-z0-9_]+";
const SIMPLE_INSERT = new RegExp(
  `^\\s*INSERT\\s+INTO\\s+(?:TABLE\\s+)?(${IDENT}(?:\\.${IDENT})?)\\s*(?:\\(([^()]*)\\))?\\s*FORMAT\\s+([A-Za-z][A-Za-z0-9_]*)\\s*;?\\s*$`,
  "i",
);
const COLUMN = new RegExp(`^${IDENT}(?:\\.${IDENT})*$`);

/** `INSERT INTO db.t (a, b) FORMAT X` with plain identifiers, as @clickhouse/client writes it. */
export function parseSimpleInsert(sql: string): SimpleInsert | undefined {
  const m = SIMPLE_INSERT.exec(sql);
  if (!m) return undefined;
  const [, table, cols, format] = m as unknown as [string, string, string | undefined, string];
  if (cols === undefined) return { table, format };
  const columns = cols.split(",").map((c) => c.trim());
  if (!columns.every((c) => COLUMN.test(c))) return undefined;
  return { table, columns, format };
}

const INSERT_HEAD = /^\s*(INSERT\s+INTO\s[^\n]*?\bFORMAT\s+[A-Za-z][A-Za-z0-9_]*)[ \t]*\r?\n/i;

/**
 * An INSERT sent whole in the body (`curl --data-binary @-`): the statement line and the data
 * after it, so the data can stay bytes. Undefined when the body is not shaped that way.
 */
export function splitInlineInsert(body: Buffer): { sql: string; data: Buffer } | undefined {
  const head = body.subarray(0, Math.min(body.length, 64 * 1024)).toString("latin1");
  const m = INSERT_HEAD.exec(head);
  if (!m) return undefined;
  const sql = body.subarray(0, Buffer.byteLength(m[1] as string, "latin1")).toString("utf8");
  return { sql, data: body.subarray(m[0].length) };
}

/** `{name:Type}` placeholders and their declared types. */
export function placeholderTypes(sql: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const m of sql.matchAll(/\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([^{}]+?)\s*\}/g)) {
    types.set(m[1] as string, m[2] as string);
  }
  return types;
}
