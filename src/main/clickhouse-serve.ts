import { runCli } from "../cli/run.js";

// The embedded ClickHouse server as a process of its own (spawned by the local stack, the tests
// and the benchmark): `headroom clickhouse serve` with the same options. Once it is serving,
// the process runs until a signal stops it.

const code = await runCli(["clickhouse", "serve", ...process.argv.slice(2)]);
if (code !== 0) process.exit(code);
