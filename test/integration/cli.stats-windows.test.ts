import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliPrincipal, createControl } from "../../src/control/service.js";
import { NO_LIMITS } from "../fixtures/providers/source.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED } from "../helpers/pipeline.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// `headroom stats` shows the windows /api/v1/headroom shows (issue 45), through the real pipeline
// (edge → queue → worker → ClickHouse and the hot copy in Redis) and the CLI as a user runs it: a
// Bedrock series that states nothing, with a limit the project declared, counted from its
// reports, and where its figures come from, in text and JSON. Without Redis, stats still answers
// with ClickHouse's figures.

let s: ReadStack;
let k: ProjectKeys;
const dir = mkdtempSync(join(tmpdir(), "headroom-stats-windows-"));
const DAY = 86_400_000;
const REPORTS = 12;
let sentAt = 0;

beforeAll(async () => {
  s = await startReadStack();
  k = await s.project();
  // As `headroom limits set` writes it: 1,000 requests a day (counted per UTC day).
  await createControl(s.p.redis, s.p.config).setLimits(cliPrincipal(), k.project, {
    limits: [
      {
        provider: "bedrock",
        model: "anthropic.claude-3-haiku",
        dimension: "requests",
        window: "1d",
        limit: 1000,
      },
    ],
  });
  sentAt = Date.now();
  await s.send(
    k.report,
    Array.from({ length: REPORTS }, (_, i) => ({
      provider: "bedrock",
      model: "anthropic.claude-3-haiku",
      app: "bed",
      timestamp: new Date(sentAt + i).toISOString(),
      limits: NO_LIMITS,
    })),
  );
  await s.stored(k.project, REPORTS);
  // A job completes once the worker wrote its counts to the hot copy.
  await eventually(async () => expect(await s.p.jobCounts()).toStrictEqual(DRAINED), {
    timeoutMs: 20_000,
  });
}, 120_000);

afterAll(async () => {
  await s?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The CLI, finding the stack only through what `env` names (no stack.json in its data dir). */
function run(args: string[], env: Record<string, string>) {
  const own = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !/^(REDIS_|CLICKHOUSE_|HEADROOM_DATA_DIR$|QUEUE_)/.test(name),
    ),
  );
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      process.execPath,
      ["bin/headroom.mjs", ...args],
      {
        env: {
          ...own,
          HEADROOM_DATA_DIR: dir,
          CLICKHOUSE_URL: s.p.config.CLICKHOUSE_URL,
          CLICKHOUSE_DATABASE: s.db,
          ...env,
        },
        timeout: 120_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? -1) : 0, stdout, stderr }),
    ),
  );
}

interface StatsJson {
  headroom: {
    provider: string;
    requests_limit: string | null;
    requests_remaining: string | null;
    requests_from: { source: string; dimension: string; window: string | null } | null;
    from: string;
  }[];
  windows: {
    provider: string;
    dimension: string;
    window: string;
    source: string;
    limit: number | null;
    remaining: number | null;
    used_pct: number | null;
    resets: string | null;
    from: string;
  }[];
}

describe("headroom stats with a declared limit and counted reports", () => {
  it("shows the counted window and its source, as /api/v1/headroom does, in JSON and text", async () => {
    const stack = { REDIS_URL: s.p.config.REDIS_URL, QUEUE_PREFIX: s.p.config.QUEUE_PREFIX };
    // The reports count in their UTC day: none left in it if the test ran past midnight. Both
    // runs within one UTC day (again, if a midnight fell between them).
    let day: number;
    let json: Awaited<ReturnType<typeof run>>;
    let text: Awaited<ReturnType<typeof run>>;
    do {
      day = Math.floor(Date.now() / DAY);
      json = await run(["stats", "--json", "--project", k.project], stack);
      text = await run(["stats", "--project", k.project], stack);
    } while (Math.floor(Date.now() / DAY) !== day);
    const used = day === Math.floor(sentAt / DAY) ? REPORTS : 0;
    const left = 1000 - used;
    const pct = Math.round(used * 10) / 100;

    expect(json.code, json.stderr).toBe(0);
    expect(json.stderr).toBe("");
    const stats = JSON.parse(json.stdout) as StatsJson;
    expect(stats.windows).toEqual([
      expect.objectContaining({
        provider: "bedrock",
        dimension: "requests",
        window: "1d",
        source: "counted",
        limit: 1000,
        remaining: left,
        used_pct: pct,
        resets: "utc_day",
        from: "hot",
      }),
    ]);
    // The headline requests: the contract's fields say nothing, so the counted window.
    expect(stats.headroom).toEqual([
      expect.objectContaining({
        provider: "bedrock",
        requests_limit: "1000",
        requests_remaining: String(left),
        requests_from: { source: "counted", dimension: "requests", window: "1d" },
        from: "hot",
      }),
    ]);
    // The same answer as the read API's, at about the same moment.
    const res = await s.get("/api/v1/headroom?group=app", k.read);
    const api = (res.json() as { series: { provider: string; windows: unknown[] }[] }).series;
    expect(api.find((x) => x.provider === "bedrock")?.windows).toEqual([
      expect.objectContaining({
        dimension: "requests",
        window: "1d",
        source: "counted",
        remaining: left,
      }),
    ]);

    expect(text.code, text.stderr).toBe(0);
    const window = new RegExp(
      `bedrock .*requests +1d +${left}/1000 \\(${pct}% used\\) +counted +in `,
    );
    expect(text.stdout).toMatch(window);
    const series = text.stdout.split("\n").find((l) => l.includes(`requests 1d ${left}/1000`));
    expect(series, text.stdout).toContain(`requests 1d ${left}/1000 (${pct}% used, counted)`);
    expect(series).toContain(`${left}/1000 (${Math.round(left / 10)}%, counted requests 1d)`);
  }, 180_000);

  it("answers with ClickHouse's figures when no Redis is named", async () => {
    const r = await run(["stats", "--json", "--project", k.project], {});
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /^headroom stats: no hot copy \(no local stack .*ClickHouse's figures shown\n$/,
    );
    const stats = JSON.parse(r.stdout) as StatsJson;
    // Bedrock states no window: ClickHouse has none of its own, and no declared one is read.
    expect(stats.windows).toEqual([]);
    expect(stats.headroom).toEqual([
      expect.objectContaining({ provider: "bedrock", requests_limit: null, from: "clickhouse" }),
    ]);
  }, 180_000);
});
