import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@clickhouse/client";
import { countedDims, usageLimits } from "../src/api/queries/usage-limits.js";
import type { ReadStore } from "../src/api/read-store.js";
import { alignRange, type Window } from "../src/api/time-range.js";
import { migrate } from "../src/clickhouse/migrations.js";
import { spawnEmbeddedClickHouse } from "../src/local/clickhouse/process.js";
import type { WindowLength } from "../src/providers/window.js";

// What /usage's counted windows cost (issue 48): the counted query's wall time and rows returned,
// and the time to give every point its counted %, for SERIES series reporting every minute for
// DAYS days, on an embedded ClickHouse server of its own.
// `npx tsx bench/counted-usage.ts` prints one line per case (median of RUNS).

const SERIES = 20;
const DAYS = 31;
const RUNS = 5;
const MIN = 60_000;
const PROJECT = "bench";

interface Case {
  name: string;
  limit: WindowLength;
  window: Window;
  from: number;
  to: number;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "counted-bench-"));
  const ch = await spawnEmbeddedClickHouse({ path: join(dir, "clickhouse"), runtime: "source" });
  const client = createClient({ url: ch.url, request_timeout: 300_000 });
  const db = "counted_bench";
  try {
    await migrate(client, { db, retentionDays: 400 });
    const now = Math.floor(Date.now() / MIN) * MIN;
    const start = now - DAYS * 86_400_000;
    const t0 = performance.now();
    await client.command({
      query: `INSERT INTO ${db}.reports (report_id, project_id, key_id, app, provider, model, timestamp, received_at, usage_input_tokens, usage_output_tokens)
        SELECT generateUUIDv4(), '${PROJECT}', 'k', concat('app', toString(number % ${SERIES})), 'bedrock', 'claude',
          toDateTime64(${start / 1000} + intDiv(number, ${SERIES}) * 60, 3, 'UTC') AS t, t, 100, 10
        FROM numbers(${SERIES * DAYS * 1440})`,
      clickhouse_settings: { max_insert_block_size: "100000" },
    });
    console.log(
      `seeded ${SERIES} series x ${DAYS} days, a report a minute each, in ${Math.round(performance.now() - t0)} ms`,
    );

    let returned = 0;
    const store: ReadStore = {
      db,
      async rows<T>(query: string, params: Record<string, unknown>) {
        const rs = await client.query({
          query,
          query_params: params,
          format: "JSONEachRow",
        });
        const rows = await rs.json<T>();
        returned += rows.length;
        return rows;
      },
    };
    const day = 86_400_000;
    const cases: Case[] = [
      { name: "1mo, last 24 h by hour", limit: "1mo", window: "hour", from: now - day, to: now },
      {
        name: "1mo, refresh (last 5 min by minute)",
        limit: "1mo",
        window: "minute",
        from: now - 5 * MIN,
        to: now,
      },
      {
        name: "1mo, last 24 h by minute",
        limit: "1mo",
        window: "minute",
        from: now - day,
        to: now,
      },
      { name: "7d, last 24 h by hour", limit: "7d", window: "hour", from: now - day, to: now },
      { name: "1m, 399 days by day", limit: "1m", window: "day", from: now - 399 * day, to: now },
      { name: "1m, 30 days by hour", limit: "1m", window: "hour", from: now - 30 * day, to: now },
    ];
    for (const c of cases) {
      const limits = usageLimits(
        {
          limits: [
            {
              provider: "bedrock",
              model: "claude",
              dimension: "requests",
              window: c.limit,
              limit: 1e6,
            },
          ],
          pools: [],
        },
        new Map(),
      );
      if (!limits) throw new Error("no limits");
      const range = alignRange({ from: c.from, to: c.to }, c.window);
      const walls: number[] = [];
      const points: number[] = [];
      let rows = 0;
      let error = "";
      for (let run = 0; run < RUNS; run++) {
        returned = 0;
        const q0 = performance.now();
        try {
          const f = await countedDims(
            store,
            PROJECT,
            limits,
            { window: c.window, groups: ["app"], sql: "", params: {} },
            range,
            true,
          );
          walls.push(performance.now() - q0);
          rows = returned;
          const w = { minute: MIN, hour: 3_600_000, day }[c.window];
          const p0 = performance.now();
          if (f)
            for (let s = 0; s < SERIES; s++)
              for (let b = range.from; b < range.to; b += w) f({ app: `app${s}` }, b);
          points.push(performance.now() - p0);
        } catch (err) {
          error = (err as Error).message.slice(0, 80);
          walls.push(performance.now() - q0);
        }
      }
      const median = (xs: number[]) =>
        xs.length === 0 ? 0 : ([...xs].sort((a, b) => a - b)[xs.length >> 1] as number);
      console.log(
        `${c.name}: query ${median(walls).toFixed(1)} ms, rows returned ${rows}, points ${median(points).toFixed(1)} ms${error ? `, error: ${error}` : ""}`,
      );
    }
  } finally {
    await client.close();
    await ch.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
