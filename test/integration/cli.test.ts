import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ClickHouseClient, createClient } from "@clickhouse/client";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { NULL_LIMITS, sampleRow } from "../../fixtures/sample-reports.js";
import { migrate } from "../../src/clickhouse/migrations.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import type { ChildServer } from "../../src/local/child-process.js";
import { spawnEmbeddedClickHouse } from "../../src/local/clickhouse/process.js";
import { writeStackFile } from "../../src/local/stack-file.js";
import { reportBodySchema, toRecord, toRow } from "../../src/report/report-schema.js";

// The `headroom` command as a user runs it (bin/headroom.mjs in a child process), against the
// test Redis and a real embedded ClickHouse server. The CLI finds both only through stack.json
// in HEADROOM_DATA_DIR, as it finds a running `npm start`: nothing else in its environment
// names them.

const id = randomBytes(4).toString("hex");
const dir = mkdtempSync(join(tmpdir(), "headroom-cli-"));
const dataDir = join(dir, "data");
const db = `cli_${id}`;
const project = `p-cli-${id}`;
let ch: ChildServer | undefined;
let client: ClickHouseClient | undefined;

// The CLI's environment: the test process's, minus anything that could point it elsewhere.
const PLACES = /^(REDIS_URL|CLICKHOUSE_|HEADROOM_DATA_DIR$|QUEUE_)/;
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !PLACES.test(k)));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function headroom(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["bin/headroom.mjs", ...args],
      {
        env: { ...baseEnv, HEADROOM_DATA_DIR: dataDir, QUEUE_PREFIX: `{cli-${id}}`, ...env },
        timeout: 60_000,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const NO_STACK_TRACE = /\n\s+at .+:\d+:\d+/;

beforeAll(async () => {
  mkdirSync(dataDir);
  ch = await spawnEmbeddedClickHouse({ path: join(dir, "clickhouse") });
  client = createClient({ url: ch.url, request_timeout: 30_000 });
  await migrate(client, { db, retentionDays: 30 });
  await createReportSink(client, db).insert(
    [1, 2, 3].map((i) => sampleRow(i, project)),
    `cli-${id}`,
  );
  // What a running local stack leaves for the CLI.
  writeStackFile(dataDir, {
    REDIS_URL: inject("redisUrl"),
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_DATABASE: db,
  });
}, 120_000);

afterAll(async () => {
  await client?.close();
  await ch?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("headroom query", () => {
  it("runs in the configured database, as clickhouse-client --database does", async () => {
    const [count, current] = await Promise.all([
      headroom(["query", "SELECT count() FROM reports", "--format", "TSV"]),
      headroom(["query", "SELECT currentDatabase()", "--format", "TSV"]),
    ]);
    expect(count, count.stderr).toMatchObject({ code: 0, stdout: "3\n", stderr: "" });
    expect(current, current.stderr).toMatchObject({ code: 0, stdout: `${db}\n` });
  });

  it("prints a table by default", async () => {
    const r = await headroom(["query", "SELECT count() AS n FROM reports"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/┌─n─┐[\s\S]*│ 3 │/);
  });

  it("prints a wide row as a table row too, not ClickHouse's vertical fallback", async () => {
    const columns = Array.from({ length: 15 }, (_, i) => `repeat('x', 20) AS c${i}`).join(", ");
    const r = await headroom(["query", `SELECT ${columns}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ +┌─c0─/);
    expect(r.stdout).not.toContain("Row 1:");
  });

  it("prints ClickHouse's message and code for a bad query, no stack trace, exit 1", async () => {
    const [unknown, syntax] = await Promise.all([
      headroom(["query", "SELECT count() FROM no_such_table"]),
      headroom(["query", "SELEC 1"]),
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toMatch(/^headroom: Code: 60\. .*no_such_table.*\(UNKNOWN_TABLE\)\n$/);
    expect(syntax.code).toBe(1);
    expect(syntax.stderr).toMatch(/^headroom: Code: 62\. .*\(SYNTAX_ERROR\)\n$/);
    for (const r of [unknown, syntax]) expect(r.stderr).not.toMatch(NO_STACK_TRACE);
  });

  it("is read-only unless --write: a DROP is refused and the table stays", async () => {
    const drop = await headroom(["query", "DROP TABLE reports_v"]);
    expect(drop.code).toBe(1);
    expect(drop.stderr).toMatch(/^headroom: Code: 164\. .*\(READONLY\)\n$/);
    const insert = await headroom(["query", "CREATE TABLE scratch (x UInt8) ENGINE = Memory"]);
    expect(insert.code).toBe(1);
    const still = await headroom(["query", "SELECT count() FROM reports_v", "--format", "TSV"]);
    expect(still, still.stderr).toMatchObject({ code: 0, stdout: "3\n" });
    // Its own settings cannot lift it.
    const lifted = await headroom(["query", "SELECT 1 SETTINGS readonly = 0"]);
    expect(lifted.code).toBe(1);
    expect(lifted.stderr).toMatch(/\(READONLY\)\n$/);
  });

  it("writes with --write", async () => {
    const made = await headroom([
      "query",
      "--write",
      "CREATE TABLE scratch (x UInt8) ENGINE = Memory",
    ]);
    expect(made, made.stderr).toMatchObject({ code: 0 });
    const dropped = await headroom(["query", "--write", "DROP TABLE scratch"]);
    expect(dropped, dropped.stderr).toMatchObject({ code: 0 });
  });

  it("works the same on the in-process engine (no CLICKHOUSE_URL)", {
    timeout: 180_000,
  }, async () => {
    // Its own data directory and no stack.json: the CLI opens the engine in its own process.
    const env = {
      HEADROOM_DATA_DIR: join(dir, "in-process"),
      CLICKHOUSE_DATABASE: db,
    };
    const migrated = await headroom(["migrate"], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    const current = await headroom(
      ["query", "SELECT currentDatabase(), count() FROM reports", "--format", "TSV"],
      env,
    );
    expect(current, current.stderr).toMatchObject({ code: 0, stdout: `${db}\t0\n` });
    const bad = await headroom(["query", "SELECT * FROM no_such_table"], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^headroom: Code: 60\. .*\(UNKNOWN_TABLE\)\n$/);
    const drop = await headroom(["query", "DROP TABLE reports"], env);
    expect(drop.code).toBe(1);
    expect(drop.stderr).toMatch(/\(READONLY\)\n$/);
  });
});

describe("help and usage", () => {
  it("answers --help on every command and subcommand, exit 0", { timeout: 120_000 }, async () => {
    const commands = [
      [],
      ["keys"],
      ["keys", "create"],
      ["dlq"],
      ["dlq", "replay"],
      ["query"],
      ["stats"],
      ["clickhouse", "serve"],
    ];
    const runs = await Promise.all(commands.map((c) => headroom([...c, "--help"])));
    runs.forEach((r, i) => {
      const command = ["headroom", ...(commands[i] ?? [])].join(" ");
      expect(r.code, `${command} --help: ${r.stderr}`).toBe(0);
      expect(r.stdout).toContain(`Usage: ${command}`);
    });
  });

  it("exits 2 with a message, not a stack, on a usage error", async () => {
    const [missing, unknown] = await Promise.all([
      headroom(["keys", "create"]),
      headroom(["dlq", "retry"]),
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/required option '--project <id>'/);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command 'retry'/);
    for (const r of [missing, unknown]) expect(r.stderr).not.toMatch(NO_STACK_TRACE);
  });
});

describe("the running stack, found through HEADROOM_DATA_DIR's stack.json", () => {
  it("headroom stats reads its ClickHouse", async () => {
    const r = await headroom(["stats", "--json", "--project", project]);
    expect(r.code, r.stderr).toBe(0);
    const stats = JSON.parse(r.stdout) as {
      volume: { project_id: string; reports: string }[];
      headroom: { project_id: string }[];
    };
    expect(stats.volume.reduce((n, v) => n + Number(v.reports), 0)).toBe(3);
    expect(stats.headroom.every((h) => h.project_id === project)).toBe(true);
    expect(stats.headroom.length).toBeGreaterThan(0);
  });

  it("headroom stats counts a credit-only app's reports as requests, not provider hints", async () => {
    // A database of its own: the other tests count every report of theirs.
    const routerDb = `${db}_router`;
    // An OpenRouter-style app: two credit-only reports and one real provider hint.
    const router = (credits: Record<string, number> | null) => {
      const receivedAt = Date.now();
      const body = reportBodySchema.parse({
        provider: "openrouter",
        model: credits ? "auto" : null,
        app: "router",
        limits: NULL_LIMITS,
        ...(credits ? { credits } : {}),
      });
      return toRow(
        toRecord(body, {
          reportId: uuidv7({ msecs: receivedAt }),
          projectId: project,
          keyId: "key_test",
          receivedAt,
        }),
      );
    };
    const ch = client as ClickHouseClient;
    await migrate(ch, { db: routerDb, retentionDays: 30 });
    await createReportSink(ch, routerDb).insert(
      [
        router({ credits_remaining: 9.5, request_cost: 0.5 }),
        router({ credits_remaining: 9, request_cost: 0.5 }),
        router(null),
      ],
      `cli-router-${id}`,
    );
    const r = await headroom(["stats", "--json", "--project", project], {
      CLICKHOUSE_DATABASE: routerDb,
    });
    expect(r.code, r.stderr).toBe(0);
    const stats = JSON.parse(r.stdout) as {
      volume: { model: string; reports: number; hints: number }[];
    };
    const of = (model: string) => stats.volume.find((v) => v.model === model);
    expect(of("auto")).toMatchObject({ reports: 2, hints: 0 });
    expect(of("")).toMatchObject({ reports: 1, hints: 1 });
  });

  it("headroom stats marks a window past its reset as reset, and shows each series' windows beside its requests and tokens", async () => {
    // A database of its own: the other tests count every report of theirs.
    const resetDb = `${db}_reset`;
    const at = Date.now() - 5 * 60_000;
    const body = reportBodySchema.parse({
      provider: "gemini",
      model: "gemini-2.5-flash",
      app: "bot",
      timestamp: new Date(at).toISOString(),
      limits: {
        requests_limit: 1000,
        requests_remaining: 0,
        tokens_limit: 100_000,
        tokens_remaining: 72_000,
        // The requests' window reset 4 minutes ago; the tokens' resets in 55 minutes.
        reset_requests_ms: 60_000,
        reset_tokens_ms: 3_600_000,
      },
    });
    const row = toRow(
      toRecord(body, {
        reportId: uuidv7({ msecs: at }),
        projectId: project,
        keyId: "key_test",
        receivedAt: at,
      }),
    );
    const ch = client as ClickHouseClient;
    await migrate(ch, { db: resetDb, retentionDays: 30 });
    await createReportSink(ch, resetDb).insert([row], `cli-reset-${id}`);
    // A deployment of its own (database and Redis prefix): stats reads the hot copy of the
    // project, which another test's database filled under the shared prefix.
    const env = { CLICKHOUSE_DATABASE: resetDb, QUEUE_PREFIX: `{cli-reset-${id}}` };
    const json = await headroom(["stats", "--json", "--project", project], env);
    expect(json.code, json.stderr).toBe(0);
    const stats = JSON.parse(json.stdout) as {
      headroom: { requests_reset: boolean; tokens_reset: boolean }[];
      windows: { dimension: string; reset: boolean; resets_at: string | null }[];
    };
    expect(stats.headroom).toMatchObject([{ requests_reset: true, tokens_reset: false }]);
    const of = (d: string) => stats.windows.find((w) => w.dimension === d);
    expect(of("requests")).toMatchObject({ reset: true });
    expect(of("tokens")).toMatchObject({ reset: false });
    expect(of("tokens")?.resets_at).not.toBeNull();

    const text = await headroom(["stats", "--project", project], env);
    expect(text.code, text.stderr).toBe(0);
    const resetAt = new Date(at + 60_000).toISOString().slice(11, 19);
    // The window table: the old figure said as old, and "reset" where the countdown was.
    expect(text.stdout).toContain(`RESET at ${resetAt}, no report since (was 0/1000 (100% used))`);
    // The series table: its requests marked reset, its windows beside them, the reset one last.
    const line = text.stdout.split("\n").find((l) => l.includes("tokens 72000/100000 (28% used);"));
    expect(line, text.stdout).toBeDefined();
    expect(line).toContain(`RESET at ${resetAt}, no report since (was 0/1000 (0%))`);
    expect(line).toContain(
      `; requests RESET at ${resetAt}, no report since (was 0/1000 (100% used))`,
    );
  });

  it("headroom keys and dlq use its Redis", async () => {
    const created = await headroom(["keys", "create", "--project", project, "--json"]);
    expect(created.code, created.stderr).toBe(0);
    const { key_id } = JSON.parse(created.stdout) as { key_id: string };
    const [listed, dlq] = await Promise.all([
      headroom(["keys", "list", "--project", project, "--json"]),
      headroom(["dlq", "list", "--json"]),
    ]);
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { key_id: string }[]).map((k) => k.key_id)).toEqual([
      key_id,
    ]);
    expect(dlq, dlq.stderr).toMatchObject({ code: 0, stdout: "[]\n" });
    const revoked = await headroom(["keys", "revoke", key_id]);
    expect(revoked, revoked.stderr).toMatchObject({ code: 0, stdout: `revoked ${key_id}\n` });
  });

  it("headroom keys create --scope read makes a read key, listed with its scope", async () => {
    const created = await headroom([
      "keys",
      "create",
      "--project",
      `${project}-r`,
      "--scope",
      "read",
      "--json",
    ]);
    expect(created.code, created.stderr).toBe(0);
    const made = JSON.parse(created.stdout) as { key: string; key_id: string; scope: string };
    expect(made.key).toMatch(/^hrr_/);
    expect(made.scope).toBe("read");
    const listed = await headroom(["keys", "list", "--project", `${project}-r`, "--json"]);
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ key_id: made.key_id, scope: "read" }),
    ]);
  });

  it("without the stack file a command says where it looked, exit 1", async () => {
    const r = await headroom(["keys", "list"], {
      HEADROOM_DATA_DIR: join(dir, "no-stack"),
      REDIS_URL: "redis://127.0.0.1:1",
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^headroom: cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
    expect(r.stderr).not.toMatch(NO_STACK_TRACE);
  });

  it("without the stack file nor a Redis named, it connects nowhere: exit 2, what to do", async () => {
    const noStack = join(dir, "no-stack");
    for (const args of [
      ["keys", "create", "--project", project],
      ["dlq", "list"],
    ]) {
      const r = await headroom(args, { HEADROOM_DATA_DIR: noStack });
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toBe(
        `headroom: no local stack in ${noStack} (no stack.json) and no Redis named: start it with \`npm start\` (the same HEADROOM_DATA_DIR), or set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS\n`,
      );
    }
  });
});
