import type { ClickHouseClient } from "@clickhouse/client";
import { BENCH_DB } from "./stack.js";

// The readers' projects while they are read: every `everyMs`, one report per project and series
// timestamped now, so that each project's /usage answer changes at every refresh, as a busy
// project's does (the seeded history alone changes only when the minute turns, and an answer
// that did not change costs the API almost nothing to refresh). Inserted into `reports` as the
// seed is (the rollups follow by their views), not through the edge: the phases count what the
// edge enqueued, and these are not the phase's reports.

export interface TouchResult {
  inserts: number;
  rows: number;
  failed: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

export async function touchProjects(
  ch: ClickHouseClient,
  opts: { projects: number; durationS: number; everyMs: number },
): Promise<TouchResult> {
  const result: TouchResult = { inserts: 0, rows: 0, failed: 0 };
  const end = performance.now() + opts.durationS * 1000;
  // 16 series per project, as seeded (read-seed.ts): provider × model × app.
  const rows = opts.projects * 16;
  for (let round = 0; performance.now() < end; round++) {
    const started = performance.now();
    try {
      await ch.command({
        query: `INSERT INTO ${BENCH_DB}.reports (report_id, project_id, key_id, app, provider,
            model, timestamp, received_at, requests_limit, requests_remaining, tokens_limit,
            tokens_remaining, reset_requests_ms, reset_tokens_ms)
          SELECT generateUUIDv4(number), concat('bench-read-', leftPad(toString(number % {p:UInt32}), 3, '0')),
            'key_touch',
            arrayElement(['chat', 'batch'], intDiv(number, {p:UInt32} * 8) % 2 + 1),
            arrayElement(['openai', 'anthropic', 'google', 'mistral'], intDiv(number, {p:UInt32}) % 4 + 1),
            arrayElement(['small', 'large'], intDiv(number, {p:UInt32} * 4) % 2 + 1),
            now64(3, 'UTC') AS ts, ts,
            10000, toInt64(10000 - ({round:UInt32} + number) % 9000), 2000000, 1000000, 60000, 30000
          FROM numbers({n:UInt32})`,
        query_params: { p: opts.projects, n: rows, round },
      });
      result.inserts++;
      result.rows += rows;
    } catch {
      result.failed++;
    }
    await sleep(opts.everyMs - (performance.now() - started));
  }
  return result;
}
