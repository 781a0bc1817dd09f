import type { SimpleInsert } from "./sql-text.js";

// An insert whose data is binary (RowBinary, as the worker sends reports) into the embedded
// engine. chdb takes insert data only inline, after the statement, where binary data is not safe
// (its public insert takes text formats only; bytes such as "\n\n" cut RowBinary data short in
// its native one). So the data is written to a file that the insert reads with `file()`, in the
// format and with the types of the table's columns: the same parser, from bytes as they came.

/** The binary formats the embedded server takes in a request body. */
export const BINARY_INSERT_FORMATS = new Set(["RowBinary"]);

const quote = (v: string) => `'${v.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
const ident = (v: string) => `\`${v.replace(/\\/g, "\\\\").replace(/`/g, "\\`")}\``;

/** The query that gives the columns' types of `insert`'s table (in `database` if unqualified). */
export function columnTypesQuery(insert: SimpleInsert, database: string): string {
  const [db, table] = insert.table.includes(".")
    ? (insert.table.split(".") as [string, string])
    : [database, insert.table];
  return `SELECT name, type FROM system.columns WHERE database = ${quote(db)} AND table = ${quote(table)} ORDER BY position`;
}

/**
 * `insert` as an INSERT … SELECT from `file`, read in its format with the types of the columns
 * it names (all of the table's when it names none). A column the table lacks is read as String:
 * the insert then fails as over HTTP, on the column.
 */
export function fileInsertSql(
  insert: SimpleInsert,
  types: ReadonlyMap<string, string>,
  file: string,
): string {
  const columns = insert.columns ?? [...types.keys()];
  const structure = columns.map((c) => `${ident(c)} ${types.get(c) ?? "String"}`).join(", ");
  return `INSERT INTO ${insert.table} (${columns.map(ident).join(", ")})
    SELECT * FROM file(${quote(file)}, ${quote(insert.format)}, ${quote(structure)})`;
}
