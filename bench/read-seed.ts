import type { ClickHouseClient } from "@clickhouse/client";
import { BENCH_DB } from "./stack.js";

// Stored history for the read phase, written by direct inserts (INSERT … SELECT FROM numbers):
// `reports` rows spread evenly over `days` for `projects` projects, 16 series each (4 providers ×
// 2 models × 2 apps), so that the rollups and latest_limits hold what months of ingest would.
// Sending them through the edge would take hours on a small machine; the read API only reads
// what ClickHouse holds, however it got there.

export const READ_PROJECT = (i: number) => `bench-read-${String(i).padStart(3, "0")}`;

const CHUNK = 1_000_000;

export async function seedReports(
  ch: ClickHouseClient,
  opts: { reports: number; projects: number; days: number; now: number },
  log: (msg: string) => void,
): Promise<{ seconds: number }> {
  const started = performance.now();
  const spanMs = opts.days * 86_400_000;
  for (let offset = 0; offset < opts.reports; offset += CHUNK) {
    const count = Math.min(CHUNK, opts.reports - offset);
    await ch.command({
      query: `INSERT INTO ${BENCH_DB}.reports (report_id, project_id, key_id, app, provider, model,
          timestamp, received_at, requests_limit, requests_remaining, tokens_limit,
          tokens_remaining, reset_requests_ms, reset_tokens_ms, credits_limit, credits_remaining,
          request_cost)
        SELECT generateUUIDv4(number), concat('bench-read-', leftPad(toString(number % {p:UInt32}), 3, '0')),
          'key_seed',
          arrayElement(['chat', 'batch'], intDiv(number, {p:UInt32} * 8) % 2 + 1),
          arrayElement(['openai', 'anthropic', 'google', 'mistral'], intDiv(number, {p:UInt32}) % 4 + 1),
          arrayElement(['small', 'large'], intDiv(number, {p:UInt32} * 4) % 2 + 1),
          fromUnixTimestamp64Milli(toInt64({now:Int64} - intDiv(number * {span:UInt64}, {n:UInt64})), 'UTC') AS ts,
          ts,
          10000, toInt64(10000 - number % 9000), 2000000, toInt64(2000000 - number % 1900000),
          60000, 30000,
          toDecimal128(100, 12), toDecimal128(100 - (number % 1000) / 10, 12), toDecimal128(0.001, 12)
        FROM numbers({offset:UInt64}, {count:UInt64})`,
      query_params: {
        p: opts.projects,
        now: opts.now,
        span: spanMs,
        n: opts.reports,
        offset,
        count,
      },
      clickhouse_settings: { max_execution_time: 3_600 },
    });
    log(`  seeded ${offset + count} of ${opts.reports} reports`);
  }
  return { seconds: Math.round((performance.now() - started) / 100) / 10 };
}
