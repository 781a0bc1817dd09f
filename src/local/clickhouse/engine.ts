import { isUtf8 } from "node:buffer";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { drainPending, type RawInsertFormat, Session } from "chdb";
import type { Logger } from "pino";
import { BINARY_INSERT_FORMATS, columnTypesQuery, fileInsertSql } from "./binary-insert.js";
import { HttpQueryError } from "./http-errors.js";
import { toBindValue } from "./query-params.js";
import {
  firstKeyword,
  mentionsWord,
  parseSimpleInsert,
  placeholderTypes,
  secondStatementAt,
  trailingFormat,
} from "./sql-text.js";
import { createTurns } from "./turns.js";

// The one chdb Session of the embedded server, and the rules that make a single shared engine
// session behave like clickhouse-server's fresh context per HTTP request. Requests run one at a
// time (the engine runs one query at a time anyway; turns.ts puts inserts before queued reads),
// so the session's state between two requests is always the baseline: the database is switched
// per request, settings from the URL are SET before the query and restored after it (an insert
// on the zero-copy path carries them in its own SETTINGS clause instead), and a statement that
// may have SET something itself is followed by a restore of everything that differs from the
// baseline.

export interface EngineRequest {
  /** The statement, without any data that follows it. */
  sql: string;
  /** Bytes after the statement (insert data); the engine reads `sql + "\n" + data`. */
  data?: Buffer;
  database: string;
  /** Output format when the query names none. */
  defaultFormat: string;
  /** `param_<name>` values, raw as sent over HTTP. */
  params: Map<string, string>;
  /** ClickHouse settings for this query only. */
  settings: Map<string, string>;
  /** GET requests are read-only, as in clickhouse-server. */
  readonly: boolean;
}

export interface Summary {
  read_rows: string;
  read_bytes: string;
  written_rows: string;
  written_bytes: string;
  total_rows_to_read: string;
  result_rows: string;
  result_bytes: string;
  elapsed_ns: string;
}

export interface EngineResult {
  body: Uint8Array;
  format: string;
  summary: Summary;
}

export interface Engine {
  readonly version: string;
  readonly timezone: string;
  run(req: EngineRequest): Promise<EngineResult>;
  /** Waits for queued queries, then closes the session so the data directory is consistent. */
  close(): Promise<void>;
}

const RAW_INSERT_FORMATS = new Set<string>([
  "JSONEachRow",
  "JSONCompactEachRow",
  "CSV",
  "CSVWithNames",
  "TSV",
  "TabSeparated",
  "TSVWithNames",
  "TabSeparatedWithNames",
]);
const SETTING_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INSERT_DATA = /\b(?:FORMAT\s+[A-Za-z]|VALUES\b)/i;
/** A column name in backquotes with nothing to escape (`windows.dimension`). */
const BACKQUOTED = /`([A-Za-z0-9_.]+)`/g;

const quote = (v: string) => `'${v.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
const ident = (v: string) => `\`${v.replace(/\\/g, "\\\\").replace(/`/g, "\\`")}\``;

function summary(p: Partial<Record<keyof Summary, number>>, startNs: bigint): Summary {
  const s = (n: number | undefined) => String(Math.max(0, Math.round(n ?? 0)));
  return {
    read_rows: s(p.read_rows),
    read_bytes: s(p.read_bytes),
    written_rows: s(p.written_rows),
    written_bytes: s(p.written_bytes),
    total_rows_to_read: s(p.total_rows_to_read),
    result_rows: s(p.result_rows),
    result_bytes: s(p.result_bytes),
    elapsed_ns: String(process.hrtime.bigint() - startNs),
  };
}

export async function openEngine(path: string, logger: Logger): Promise<Engine> {
  let session = new Session(path);
  /** Where binary insert data waits for its insert (binary-insert.ts). */
  const spillDir = await mkdtemp(join(tmpdir(), "headroom-ch-insert-"));
  let spilled = 0;
  const text = async (sql: string) => (await session.queryAsync(sql, { format: "TSV" })).text();
  const readChanged = async () => {
    const rows = (
      await session.queryAsync("SELECT name, value FROM system.settings WHERE changed", {
        format: "JSONCompactEachRow",
      })
    )
      .text()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as [string, string]);
    return new Map(rows);
  };
  // What the engine itself changed at start (chdb sets a few settings); restores go back to this.
  let baseline = await readChanged();
  let database = (await text("SELECT currentDatabase()")).trim();
  const [version = "", timezone = ""] = (await text("SELECT version(), timezone()"))
    .trim()
    .split("\t");

  const restoreStatement = (names: Iterable<string>) => {
    // `readonly` first: while it is set, only a statement that lifts it is allowed.
    const sorted = [...names].sort((a, b) => Number(b === "readonly") - Number(a === "readonly"));
    const parts = sorted.map((n) => {
      const base = baseline.get(n);
      return `${n} = ${base === undefined ? "DEFAULT" : quote(base)}`;
    });
    return parts.length ? `SET ${parts.join(", ")}` : "";
  };

  /** Last resort if the session cannot be brought back to its baseline: a fresh session. */
  const reopen = async (why: unknown) => {
    logger.error({ err: why }, "engine session could not be restored; reopening it");
    session.close();
    await drainPending();
    session = new Session(path);
    baseline = await readChanged();
    database = (await text("SELECT currentDatabase()")).trim();
  };

  const restore = async (names: Iterable<string>) => {
    const sql = restoreStatement(names);
    if (!sql) return;
    try {
      await session.queryAsync(sql);
    } catch (err) {
      await reopen(err);
    }
  };

  const restoreAll = async () => {
    try {
      const changed = await readChanged();
      const differing = [...changed].filter(([n, v]) => baseline.get(n) !== v).map(([n]) => n);
      const lost = [...baseline.keys()].filter((n) => !changed.has(n));
      await restore([...differing, ...lost]);
    } catch (err) {
      await reopen(err);
    }
  };

  const useDatabase = async (name: string) => {
    if (name === database) return;
    await session.queryAsync(`USE ${ident(name)}`);
    database = name;
  };

  const execute = async (req: EngineRequest): Promise<EngineResult> => {
    const start = process.hrtime.bigint();
    const kind = firstKeyword(req.sql);
    // An INSERT's inline data (after FORMAT x / VALUES) is data, not statements.
    const dataAt = kind === "INSERT" ? req.sql.search(INSERT_DATA) : -1;
    const at = secondStatementAt(dataAt === -1 ? req.sql : req.sql.slice(0, dataAt));
    if (at !== -1) {
      throw new HttpQueryError(
        "SYNTAX_ERROR",
        `Syntax error (Multi-statements are not allowed): failed at position ${at + 1} (end of query): ${req.sql.slice(at).trim()}. `,
      );
    }
    for (const name of req.settings.keys()) {
      if (!SETTING_NAME.test(name))
        throw new HttpQueryError("UNKNOWN_SETTING", `Unknown setting '${name}'`);
    }
    const settings = new Map(req.settings);
    // clickhouse-server turns a GET into readonly=2 unless the user asked for stricter.
    if (req.readonly && (settings.get("readonly") ?? "0") === "0") settings.set("readonly", "2");
    const format = (kind === "INSERT" ? undefined : trailingFormat(req.sql)) ?? req.defaultFormat;
    await useDatabase(req.database);

    const data = req.data && req.data.length > 0 ? req.data : undefined;
    // Binary data is no text to append to the statement: the insert reads it from a file.
    const binary =
      kind === "INSERT" && !req.readonly && data
        ? parseSimpleInsert(req.sql.replace(BACKQUOTED, "$1"))
        : undefined;
    if (binary && data && BINARY_INSERT_FORMATS.has(binary.format)) {
      const types = new Map(
        (
          await session.queryAsync(columnTypesQuery(binary, database), {
            format: "JSONCompactEachRow",
          })
        )
          .text()
          .split("\n")
          .filter(Boolean)
          .map((line) => JSON.parse(line) as [string, string]),
      );
      const file = join(spillDir, `insert-${++spilled}.bin`);
      await writeFile(file, data);
      try {
        return await execute({ ...req, sql: fileInsertSql(binary, types, file), data: undefined });
      } finally {
        await rm(file, { force: true });
      }
    }
    const insert = kind === "INSERT" && !req.readonly ? parseSimpleInsert(req.sql) : undefined;
    if (insert && !data) {
      // An INSERT … FORMAT X with an empty body writes nothing and succeeds, as over HTTP.
      return { body: new Uint8Array(), format, summary: summary({}, start) };
    }
    if (insert && data && RAW_INSERT_FORMATS.has(insert.format) && req.params.size === 0) {
      // Zero-copy path; per-insert settings go into the statement's own SETTINGS clause.
      const r = await session.insert({
        table: insert.table,
        columns: insert.columns,
        values: data,
        format: insert.format as RawInsertFormat,
        settings: Object.fromEntries(settings),
      });
      const written = { written_rows: r.rowsWritten, written_bytes: r.bytesWritten };
      return {
        body: new Uint8Array(),
        format,
        summary: summary(
          {
            ...written,
            read_rows: r.rowsSent ?? r.rowsWritten,
            read_bytes: r.bytesSent,
            result_rows: r.rowsWritten,
            result_bytes: r.bytesWritten,
          },
          start,
        ),
      };
    }
    if (data && !isUtf8(data)) {
      throw new HttpQueryError(
        "NOT_IMPLEMENTED",
        "The embedded ClickHouse server accepts only text data (e.g. JSONEachRow, CSV) in a request body",
      );
    }
    const sql = data ? `${req.sql}\n${data.toString("utf8")}` : req.sql;
    const names = [...settings.keys()];
    let applied: boolean | undefined;
    try {
      if (names.length) {
        const readonlyLast = names.sort(
          (a, b) => Number(a === "readonly") - Number(b === "readonly"),
        );
        applied = false;
        await session.queryAsync(
          `SET ${readonlyLast.map((n) => `${n} = ${quote(settings.get(n) as string)}`).join(", ")}`,
        );
        applied = true;
      }
      const types = placeholderTypes(req.sql);
      const bound = Object.fromEntries(
        [...req.params].map(([k, v]) => [k, toBindValue(v, types.get(k))] as const),
      );
      const r = req.params.size
        ? await session.queryBindAsync(sql, bound, { format })
        : await session.queryAsync(sql, { format });
      const body = r.bytes();
      return {
        body,
        format,
        summary: summary(
          {
            read_rows: r.rowsRead,
            read_bytes: r.bytesRead,
            result_rows: r.rowsRead,
            result_bytes: r.bytesRead,
          },
          start,
        ),
      };
    } catch (err) {
      if (req.readonly && (err as { clickhouseCode?: number }).clickhouseCode === 164) {
        (err as Error).message = (err as Error).message.replace(
          "Cannot execute query in readonly mode.",
          "Cannot execute query in readonly mode. For queries over HTTP, method GET implies readonly. You should use method POST for modifying queries.",
        );
      }
      throw err;
    } finally {
      // A SET that failed (say, on an unknown setting) may name settings that cannot be reset:
      // compare the whole session with the baseline instead.
      if (applied) await restore(names);
      if (applied === false || mentionsWord(req.sql, "SET")) await restoreAll();
      if (mentionsWord(req.sql, "USE")) database = "";
    }
  };

  const turns = createTurns();
  let closed = false;
  return {
    version,
    timezone,
    run(req) {
      if (closed) return Promise.reject(new Error("the embedded ClickHouse engine is closed"));
      // An insert of data sent with it (ingest's); an INSERT … SELECT (a migration) waits its
      // turn like a read.
      const sent = req.data !== undefined && req.data.length > 0;
      const kind = sent && firstKeyword(req.sql) === "INSERT" && !req.readonly ? "insert" : "read";
      return turns.run(kind, () => execute(req));
    },
    async close() {
      if (closed) return;
      closed = true;
      await turns.idle();
      session.close();
      await drainPending();
      await rm(spillDir, { recursive: true, force: true });
    },
  };
}
