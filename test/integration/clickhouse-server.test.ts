import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import {
  type ClickHouseClient,
  type ClickHouseClientConfigOptions,
  ClickHouseError,
  ClickHouseLogLevel,
  createClient as createHttpClient,
} from "@clickhouse/client";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createClickHouse } from "../../src/clickhouse/client.js";
import {
  type EmbeddedClickHouseProcess,
  spawnEmbeddedClickHouse,
} from "../../src/local/clickhouse/process.js";
import {
  type EmbeddedClickHouse,
  startEmbeddedClickHouse,
} from "../../src/local/clickhouse/server.js";
import { startStackClickHouse } from "../../src/local/local-stack.js";
import { eventually } from "../helpers/eventually.js";

// The embedded ClickHouse server answers @clickhouse/client and curl the way clickhouse-server
// does: real chdb engine, real HTTP, no mocks. One server runs in this process; child processes
// cover auth, fault injection and a SIGKILL/restart on the same data directory and port.

const dir = mkdtempSync(join(tmpdir(), "headroom-ch-server-"));
const db = `t_${randomBytes(4).toString("hex")}`;
/** A table name of the calling test's own: tests share a server, never a table. */
const own = (name: string) => `${db}.${name}_${randomBytes(4).toString("hex")}`;

/** Expected failures would otherwise be logged by the client as well as asserted here. */
const createClient = (opts: ClickHouseClientConfigOptions) =>
  createHttpClient({ ...opts, log: { level: ClickHouseLogLevel.OFF } });

/** The client's pooled sockets may have died with a server: its next requests reconnect. */
const poll = <T>(fn: () => Promise<T>) => eventually(fn, { timeoutMs: 10_000, intervalMs: 50 });

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected the promise to reject");
}

const SUMMARY_KEYS = [
  "read_rows",
  "read_bytes",
  "written_rows",
  "written_bytes",
  "total_rows_to_read",
  "result_rows",
  "result_bytes",
  "elapsed_ns",
];

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("embedded ClickHouse server, in process", () => {
  let server: EmbeddedClickHouse;
  let client: ClickHouseClient;
  // Warnings and errors the server logs; a healthy run has none.
  const problems: string[] = [];

  beforeAll(async () => {
    server = await startEmbeddedClickHouse({
      path: join(dir, "in-process"),
      port: 0,
      logger: pino({ level: "warn" }, { write: (line: string) => problems.push(line) }),
    });
    client = createClient({ url: server.url });
    await client.command({ query: `CREATE DATABASE ${db}` });
  });

  // The engine session stays at its baseline without ever having to be reopened: a healthy
  // server logs no warning or error during any test.
  afterEach(() => {
    expect(problems.splice(0)).toEqual([]);
  });

  /** A fresh `events` table for one test. */
  async function eventsTable(): Promise<string> {
    const table = own("events");
    await client.command({
      query: `CREATE TABLE ${table} (id UInt32, name String, at DateTime64(3, 'UTC'))
              ENGINE = MergeTree ORDER BY id`,
    });
    return table;
  }

  afterAll(async () => {
    await client?.close();
    await server?.close();
  });

  const sql = (query: string, init: RequestInit = {}) =>
    fetch(`${server.url}/?query=${encodeURIComponent(query)}`, init);

  it("answers /ping, HEAD /ping and GET / with Ok.", async () => {
    expect(await client.ping()).toEqual({ success: true });
    for (const [path, method] of [
      ["/ping", "GET"],
      ["/", "GET"],
    ] as const) {
      const res = await fetch(`${server.url}${path}`, { method });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("Ok.\n");
    }
    const head = await fetch(`${server.url}/ping`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect((await fetch(`${server.url}/nope`)).status).toBe(404);
  });

  it("answers GET ?query=SELECT 1 as TabSeparated with clickhouse-server's headers", async () => {
    const res = await fetch(`${server.url}/?query=SELECT%201&query_id=q-select-one`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("1\n");
    expect(res.headers.get("content-type")).toBe("text/tab-separated-values; charset=UTF-8");
    expect(res.headers.get("x-clickhouse-format")).toBe("TabSeparated");
    expect(res.headers.get("x-clickhouse-query-id")).toBe("q-select-one");
    expect(res.headers.get("x-clickhouse-timezone")).toBeTruthy();
    expect(res.headers.get("x-clickhouse-server-display-name")).toBeTruthy();
    const summary = JSON.parse(res.headers.get("x-clickhouse-summary") ?? "{}");
    expect(Object.keys(summary)).toEqual(SUMMARY_KEYS);
    expect(Object.values(summary).every((v) => typeof v === "string")).toBe(true);

    const json = await sql("SELECT 1 AS x FORMAT JSONEachRow");
    expect(json.headers.get("content-type")).toBe("application/x-ndjson; charset=UTF-8");
    expect(json.headers.get("x-clickhouse-format")).toBe("JSONEachRow");
    expect(await json.text()).toBe('{"x":1}\n');
    const byDefault = await sql("SELECT 1 AS x", { headers: {} });
    expect(await byDefault.text()).toBe("1\n");
    const defaultFormat = await fetch(
      `${server.url}/?query=SELECT%201%20AS%20x&default_format=JSONCompactEachRow`,
    );
    expect(await defaultFormat.text()).toBe("[1]\n");
  });

  it("inserts JSONEachRow and JSONCompactEachRow and queries with query_params", async () => {
    const events = await eventsTable();
    const a = await client.insert({
      table: events,
      values: [
        { id: 1, name: "one", at: "2026-01-01 00:00:00.001" },
        { id: 2, name: "two", at: "2026-01-01 00:00:00.002" },
      ],
      format: "JSONEachRow",
    });
    expect(a.summary?.written_rows).toBe("2");
    const b = await client.insert({
      table: events,
      columns: ["id", "name", "at"],
      values: [
        [3, "tab\there 'quoted' back\\slash", "2026-01-01 00:00:00.003"],
        [4, "four", "2026-01-01 00:00:00.004"],
      ],
      format: "JSONCompactEachRow",
    });
    expect(b.summary?.written_rows).toBe("2");

    const rs = await client.query({
      query: `SELECT id, name FROM ${events} WHERE id >= {min:UInt32} AND name != {skip:String} ORDER BY id`,
      query_params: { min: 2, skip: "four" },
      format: "JSONEachRow",
    });
    expect(await rs.json()).toEqual([
      { id: 2, name: "two" },
      { id: 3, name: "tab\there 'quoted' back\\slash" },
    ]);

    // Escaped parameter values are read the way clickhouse-server reads them.
    const odd = "tab\there 'quoted' back\\slash";
    const params = await client.query({
      query: `SELECT {s:String} AS s, {a:Array(String)} AS a, {n:Nullable(Int8)} AS n,
                     (SELECT toUInt32(count()) FROM ${events} WHERE name IN {a:Array(String)}) AS c`,
      query_params: { s: odd, a: [odd, "it's"], n: null },
      format: "JSONEachRow",
    });
    expect(await params.json()).toEqual([{ s: odd, a: [odd, "it's"], n: null, c: 1 }]);

    // 20,000 UUIDs fit in the URL (a 1 MiB request line, as clickhouse-server allows) and in a
    // multipart body (clickhouse-js use_multipart_params).
    const ids = Array.from({ length: 20_000 }, () => crypto.randomUUID());
    const count = {
      query: "SELECT toUInt32(length({ids:Array(UUID)})) AS n",
      query_params: { ids },
    };
    const inUrl = await client.query({ ...count, format: "JSONEachRow" });
    expect(await inUrl.json()).toEqual([{ n: 20_000 }]);
    const multipart = createClient({ url: server.url, use_multipart_params: true });
    try {
      const rs = await multipart.query({
        query: "SELECT {s:String} AS s, toUInt32(length({ids:Array(UUID)})) AS n",
        query_params: { s: odd, ids },
        format: "JSONEachRow",
      });
      expect(await rs.json()).toEqual([{ s: odd, n: 20_000 }]);
    } finally {
      await multipart.close();
    }
  });

  it("applies clickhouse_settings to that query only", async () => {
    const read = async (settings?: Record<string, number>) => {
      const rs = await client.query({
        query: "SELECT getSetting('max_block_size') AS v",
        format: "JSONEachRow",
        clickhouse_settings: settings,
      });
      return String(((await rs.json()) as { v: unknown }[])[0]?.v);
    };
    const before = await read();
    expect(await read({ max_block_size: 1234 })).toBe("1234");
    expect(await read()).toBe(before);
    const unknown = await fetch(`${server.url}/?query=SELECT%201&no_such_setting=1`);
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get("x-clickhouse-exception-code")).toBe("115");
    expect(await read({ max_block_size: 77 })).toBe("77");
    // A SET sent on its own has no lasting effect without a session, as over HTTP.
    await client.command({ query: "SET max_block_size = 4321" });
    expect(await read()).toBe(before);
    // Concurrent requests with different settings each see their own.
    const values = Array.from({ length: 12 }, (_, i) => 1000 + i);
    expect(await Promise.all(values.map((v) => read({ max_block_size: v })))).toEqual(
      values.map(String),
    );
    expect(await read()).toBe(before);
  });

  it("deduplicates a repeated insert with the same insert_deduplication_token", async () => {
    const dedup = own("dedup");
    await client.command({
      query: `CREATE TABLE ${dedup} (id UInt32) ENGINE = MergeTree ORDER BY id
              SETTINGS non_replicated_deduplication_window = 100`,
    });
    const insert = (ids: number[], token: string) =>
      client.insert({
        table: dedup,
        values: ids.map((id) => ({ id })),
        format: "JSONEachRow",
        clickhouse_settings: { insert_deduplication_token: token },
      });
    await insert([1, 2, 3], "batch-1");
    await insert([1, 2, 3], "batch-1");
    await insert([4], "batch-2");
    const rs = await client.query({
      query: `SELECT groupArray(id) AS ids FROM (SELECT id FROM ${dedup} ORDER BY id)`,
      format: "JSONEachRow",
    });
    expect(await rs.json()).toEqual([{ ids: [1, 2, 3, 4] }]);
    // The token did not stay behind: a later insert without one is not taken for "batch-2".
    await client.insert({ table: dedup, values: [{ id: 9 }], format: "JSONEachRow" });
    const count = await client.query({
      query: `SELECT toUInt32(count()) AS n FROM ${dedup} WHERE id = 9`,
      format: "JSONEachRow",
    });
    expect(await count.json()).toEqual([{ n: 1 }]);
  });

  it("reports errors with ClickHouse's codes, types, statuses and body", async () => {
    const events = await eventsTable();
    const syntax = await rejection(client.query({ query: "SELEC 1" }));
    expect(syntax).toBeInstanceOf(ClickHouseError);
    expect(syntax).toMatchObject({ code: "62", type: "SYNTAX_ERROR" });
    const table = await rejection(client.query({ query: `SELECT * FROM ${db}.missing` }));
    expect(table).toMatchObject({ code: "60", type: "UNKNOWN_TABLE" });
    const data = await rejection(
      client.insert({
        table: events,
        values: [{ id: "not a number", name: "x", at: "2026-01-01 00:00:00" }],
        format: "JSONEachRow",
      }),
    );
    expect(data).toBeInstanceOf(ClickHouseError);
    expect(["6", "27", "72", "117"]).toContain((data as ClickHouseError).code);

    const res = await fetch(server.url, { method: "POST", body: "SELEC 1" });
    expect(res.status).toBe(400);
    expect(res.headers.get("x-clickhouse-exception-code")).toBe("62");
    expect(res.headers.get("content-type")).toBe("text/plain; charset=UTF-8");
    expect(await res.text()).toMatch(
      /^Code: 62\. DB::Exception: Syntax error: .*\. \(SYNTAX_ERROR\) \(version \d+(\.\d+)+\)\n$/s,
    );
    const missing = await sql(`SELECT * FROM ${db}.missing`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get("x-clickhouse-exception-code")).toBe("60");
    const unknownDb = await fetch(`${server.url}/?query=SELECT%201&database=no_such_db`);
    expect(unknownDb.status).toBe(404);
    expect(unknownDb.headers.get("x-clickhouse-exception-code")).toBe("81");
    // The engine's doubled "Code: 73 … Code: 73" is reported once.
    const format = await sql("SELECT 1 FORMAT NoSuchFormat");
    expect(format.status).toBe(404);
    expect(await format.text()).toMatch(
      /^Code: 73\. DB::Exception: Unknown format NoSuchFormat\.[^\n]*\(UNKNOWN_FORMAT\) \(version [\d.]+\)\n$/,
    );
  });

  it("refuses writes over GET, several statements and an empty query", async () => {
    const events = await eventsTable();
    const get = await sql(`INSERT INTO ${events} (id, name, at) VALUES (99, 'x', now())`);
    expect(get.status).toBe(500);
    expect(get.headers.get("x-clickhouse-exception-code")).toBe("164");
    expect(await get.text()).toContain("method GET implies readonly");
    // readonly did not stick to the shared engine session.
    await client.command({
      query: `INSERT INTO ${events} (id, name, at) VALUES (98, 'y', now())`,
    });
    const kept = await client.query({
      query: `SELECT groupArray(id) AS ids FROM ${events}`,
      format: "JSONEachRow",
    });
    expect(await kept.json()).toEqual([{ ids: [98] }]);

    const multi = await fetch(server.url, { method: "POST", body: "SELECT 1; SELECT 2" });
    expect(multi.status).toBe(400);
    expect(await multi.text()).toContain("Multi-statements are not allowed");
    const trailing = await fetch(server.url, { method: "POST", body: "SELECT 1;  -- done\n" });
    expect(await trailing.text()).toBe("1\n");
    const empty = await fetch(server.url, { method: "POST", body: "" });
    expect(empty.headers.get("x-clickhouse-exception-code")).toBe("62");
  });

  it("accepts gzip request bodies and compresses responses when asked", async () => {
    const events = await eventsTable();
    const rows = '{"id":201,"name":"gz","at":"2026-01-01 00:00:00"}\n';
    const res = await fetch(
      `${server.url}/?query=${encodeURIComponent(`INSERT INTO ${events} FORMAT JSONEachRow`)}`,
      { method: "POST", body: gzipSync(rows), headers: { "Content-Encoding": "gzip" } },
    );
    expect(res.status).toBe(200);
    const inline = await fetch(server.url, {
      method: "POST",
      body: gzipSync(`INSERT INTO ${events} FORMAT CSV\n202,"csv, inline",2026-01-01 00:00:00\n`),
      headers: { "Content-Encoding": "gzip" },
    });
    expect(inline.status).toBe(200);

    const compressed = createClient({
      url: server.url,
      compression: { request: true, response: true },
    });
    try {
      await compressed.insert({
        table: events,
        values: [{ id: 203, name: "client gzip", at: "2026-01-01 00:00:00" }],
        format: "JSONEachRow",
      });
      const rs = await compressed.query({
        query: `SELECT name FROM ${events} ORDER BY id`,
        format: "JSONEachRow",
      });
      expect(await rs.json()).toEqual([
        { name: "gz" },
        { name: "csv, inline" },
        { name: "client gzip" },
      ]);
    } finally {
      await compressed.close();
    }
  });

  // Speed is measured by `npm run bench`, on a quiet machine; here only that it is all stored.
  it("takes a 20,000-row JSONCompactEachRow insert in one request", async () => {
    const bulk = own("bulk");
    await client.command({
      query: `CREATE TABLE ${bulk} (id UUID, project LowCardinality(String), n Nullable(Int64),
              at DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY (project, id)`,
    });
    const rows = Array.from({ length: 20_000 }, (_, i) => [
      crypto.randomUUID(),
      `p${i % 10}`,
      i,
      "2026-01-01 00:00:00.000",
    ]);
    const { summary } = await client.insert({
      table: bulk,
      values: rows,
      format: "JSONCompactEachRow",
    });
    expect(summary?.written_rows).toBe("20000");
    const rs = await client.query({
      query: `SELECT toUInt32(count()) AS rows, toUInt32(sum(n)) AS total, toUInt32(uniqExact(id)) AS ids
              FROM ${bulk}`,
      format: "JSONEachRow",
    });
    expect(await rs.json()).toEqual([{ rows: 20_000, total: (19_999 * 20_000) / 2, ids: 20_000 }]);
  });
});

describe("embedded ClickHouse server, as a child process", () => {
  const path = join(dir, "child");
  const auth = { user: "headroom", password: "s3cret pass" };
  let ch: EmbeddedClickHouseProcess;
  let faulty: EmbeddedClickHouseProcess | undefined;
  let client: ClickHouseClient;

  beforeAll(async () => {
    ch = await spawnEmbeddedClickHouse({ path, ...auth });
    client = createClickHouse({
      CLICKHOUSE_URL: ch.url,
      CLICKHOUSE_USER: auth.user,
      CLICKHOUSE_PASSWORD: auth.password,
      CLICKHOUSE_DATABASE: "default",
      CLICKHOUSE_PATH: path,
      CLICKHOUSE_REQUEST_TIMEOUT_MS: 10_000,
    });
  });

  afterAll(async () => {
    await client?.close();
    await ch?.kill();
    await faulty?.kill();
  });

  it("requires the configured user and password", async () => {
    expect(await client.ping()).toEqual({ success: true });
    await client.command({ query: "SELECT 1" });
    const wrong = createClient({ url: ch.url, username: auth.user, password: "nope" });
    try {
      const err = await rejection(wrong.query({ query: "SELECT 1" }));
      expect(err).toBeInstanceOf(ClickHouseError);
      expect(err).toMatchObject({ code: "516", type: "AUTHENTICATION_FAILED" });
    } finally {
      await wrong.close();
    }
    const anonymous = await fetch(`${ch.url}/?query=SELECT%201`);
    expect(anonymous.status).toBe(403);
    expect(anonymous.headers.get("x-clickhouse-exception-code")).toBe("516");
    expect(await anonymous.text()).toMatch(
      /^Code: 516\. DB::Exception: default: Authentication failed: password is incorrect, or there is no user with such name\. \(AUTHENTICATION_FAILED\) \(version [\d.]+\)\n$/,
    );
    const byHeaders = await fetch(`${ch.url}/?query=SELECT%202`, {
      headers: { "X-ClickHouse-User": auth.user, "X-ClickHouse-Key": auth.password },
    });
    expect(await byHeaders.text()).toBe("2\n");
    const byParams = await fetch(
      `${ch.url}/?query=SELECT%203&user=${auth.user}&password=${encodeURIComponent(auth.password)}`,
    );
    expect(await byParams.text()).toBe("3\n");
    // Health checks need no credentials, as with clickhouse-server.
    expect((await fetch(`${ch.url}/ping`)).status).toBe(200);
  });

  /** A table of the calling test's own, with ids 0..499 in it. */
  async function keptTable(): Promise<string> {
    const table = `default.kept_${randomBytes(4).toString("hex")}`;
    await client.command({
      query: `CREATE TABLE ${table} (id UInt32) ENGINE = MergeTree ORDER BY id`,
    });
    await client.insert({
      table,
      values: Array.from({ length: 500 }, (_, id) => [id]),
      format: "JSONCompactEachRow",
    });
    return table;
  }

  it("keeps acknowledged rows across SIGKILL and a restart on the same path and port", async () => {
    const kept = await keptTable();
    const { port, url } = ch;
    await ch.kill();
    expect(ch.process.signalCode).toBe("SIGKILL");
    expect(
      await fetch(`${url}/ping`).then(
        () => "up",
        () => "down",
      ),
    ).toBe("down");

    ch = await spawnEmbeddedClickHouse({ path, port, ...auth });
    expect(ch.url).toBe(url);
    // The client's pooled sockets died with the old process: its next requests reconnect.
    const rows = await poll(async () => {
      const rs = await client.query({
        query: `SELECT toUInt32(count()) AS n, toUInt32(sum(id)) AS s FROM ${kept}`,
        format: "JSONEachRow",
      });
      return rs.json();
    });
    expect(rows).toEqual([{ n: 500, s: (499 * 500) / 2 }]);
  });

  it("stops on SIGTERM with exit code 0", async () => {
    const kept = await keptTable();
    const { port } = ch;
    await ch.stop();
    expect(ch.process.exitCode).toBe(0);
    ch = await spawnEmbeddedClickHouse({ path, port, ...auth });
    const rs = await poll(() =>
      client.query({
        query: `SELECT toUInt32(count()) AS n FROM ${kept}`,
        format: "JSONEachRow",
      }),
    );
    expect(await rs.json()).toEqual([{ n: 500 }]);
  });

  it("injects faults: ClickHouse's TOO_MANY_SIMULTANEOUS_QUERIES or a dropped connection", async () => {
    faulty = await spawnEmbeddedClickHouse({ path: join(dir, "faulty"), faultErrorRate: 1 });
    const outcomes = new Set<string>();
    for (let i = 0; i < 30; i++) {
      try {
        const res = await fetch(`${faulty.url}/?query=SELECT%201`);
        expect(res.headers.get("x-clickhouse-exception-code")).toBe("202");
        expect(await res.text()).toContain("(TOO_MANY_SIMULTANEOUS_QUERIES)");
        outcomes.add(`status ${res.status}`);
      } catch (err) {
        if ((err as Error).name === "AssertionError") throw err;
        outcomes.add("dropped");
      }
    }
    expect([...outcomes].sort()).toEqual(["dropped", "status 500"]);
    expect((await fetch(`${faulty.url}/ping`)).status).toBe(200);
  });
});

describe("createClickHouse without CLICKHOUSE_URL", () => {
  it("uses the embedded engine in the calling process", async () => {
    // A process of its own: the engine is one per process, and this one already has a server.
    const script = join(dir, "embedded-client.mts");
    const clientModule = fileURLToPath(new URL("../../src/clickhouse/client.ts", import.meta.url));
    writeFileSync(
      script,
      `import { createClickHouse } from ${JSON.stringify(clientModule)};
       const client = createClickHouse({
         CLICKHOUSE_USER: "default", CLICKHOUSE_PASSWORD: "", CLICKHOUSE_DATABASE: "default",
         CLICKHOUSE_PATH: ${JSON.stringify(join(dir, "embedded-client"))},
         CLICKHOUSE_REQUEST_TIMEOUT_MS: 10000,
       });
       const rs = await client.query({ query: "SELECT {n:UInt8} + 1 AS n", query_params: { n: 41 }, format: "JSONEachRow" });
       process.stdout.write(JSON.stringify(await rs.json()));
       await client.close();`,
    );
    const { stdout } = await promisify(execFile)(process.execPath, [
      "--import",
      import.meta.resolve("tsx"),
      script,
    ]);
    expect(JSON.parse(stdout)).toEqual([{ n: 42 }]);
  });
});

describe("the local stack's embedded ClickHouse", () => {
  const dataDir = join(dir, "stack");
  const config = {
    CLICKHOUSE_PATH: join(dataDir, "clickhouse"),
    STACK_CLICKHOUSE_PORT: undefined,
    CLICKHOUSE_USER: "default",
    CLICKHOUSE_PASSWORD: "",
  };
  const quiet = { inheritOutput: false, detached: false };

  it("answers no query without credentials: its password is made on first start and kept", async () => {
    mkdirSync(dataDir, { recursive: true });
    const first = await startStackClickHouse(config, dataDir, quiet);
    const port = first.server.port;
    try {
      const password = first.generatedPassword as string;
      expect(password).toMatch(/^[\w-]{32}$/);
      const file = join(dataDir, "clickhouse-password");
      expect(statSync(file).mode & 0o777).toBe(0o600);
      // What a webhook aimed at this port sends: a POST with a query and no credentials.
      const forged = await fetch(`${first.server.url}/?query=${encodeURIComponent("SELECT 1")}`, {
        method: "POST",
        body: "{}",
      });
      expect(forged.status).toBe(403);
      expect(forged.headers.get("x-clickhouse-exception-code")).toBe("516");
      const authed = createClient({ url: first.server.url, password });
      expect(await (await authed.query({ query: "SELECT 1 AS one" })).json()).toMatchObject({
        data: [{ one: 1 }],
      });
      await authed.close();
    } finally {
      await first.server.stop();
    }
    // A restart keeps the password the stack's processes and the CLI were given.
    const again = await startStackClickHouse(
      { ...config, STACK_CLICKHOUSE_PORT: port },
      dataDir,
      quiet,
    );
    try {
      expect(again.generatedPassword).toBe(first.generatedPassword);
    } finally {
      await again.server.stop();
    }
  });
});
