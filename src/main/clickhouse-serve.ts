import { serveClickHouse } from "../local/clickhouse/serve.js";

// The embedded ClickHouse server as a process of its own (spawned by the local stack, the tests
// and the benchmark; `headroom clickhouse serve` runs the same function).

serveClickHouse(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`clickhouse serve: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
