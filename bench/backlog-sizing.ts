import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config.js";
import { createEdge } from "../src/edge/create-edge.js";
import { createLogger } from "../src/lib/logger.js";
import { startRedisServer } from "../src/local/redis-server.js";
import { createReportsQueue } from "../src/queue/reports-queue.js";
import { createCliRedis } from "../src/redis/connections.js";
import { redisTopology } from "../src/redis/topology.js";
import { backlogBounds } from "./backlog-bounds.js";
import { runFixedRate } from "./fixed-rate.js";
import { createBodySource } from "./report-bodies.js";

// How long a ClickHouse outage the backlog absorbs before the edge answers 503 (docs/operations.md, "Sizing
// the backlog"). No worker runs: every report sent stays queued, as in an outage. At each rate,
// an edge on a Redis of its own takes reports for a while; the jobs they made and the memory
// they hold give reports per job and bytes per report, from which the time to each bound
// (BACKLOG_MAX_JOBS jobs, REDIS_MEMORY_MAX_RATIO of maxmemory) follows.
//
//   npx tsx bench/backlog-sizing.ts [rates=100,1000,4000] [seconds=20]

const rates = (process.argv[2] ?? "100,1000,4000").split(",").map(Number);
const seconds = Number(process.argv[3] ?? 20);
const MAXMEMORY = 2 * 1024 ** 3; // the compose file's REDIS_MAXMEMORY, 2gb

const dir = mkdtempSync(join(tmpdir(), "headroom-sizing-"));
const redisServer = await startRedisServer({ dir, maxmemory: "2gb", appendonly: false });
const config = loadConfig({ REDIS_URL: redisServer.url, PORT: "0", HOST: "127.0.0.1" });
const edge = await createEdge(config, createLogger("silent", "sizing"));
const url = await edge.app.listen({ port: 0, host: "127.0.0.1" });
const redis = createCliRedis(redisTopology(config));
const queue = createReportsQueue(redis, { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME });
const { key } = await edge.keyStore.create("sizing", {
  plan: "unlimited",
  defaultPlan: "unlimited",
});
const source = createBodySource();
const bodies = Array.from({ length: source.size }, (_, i) => source.body(i));

const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await redis.info("memory"))?.[1]);
const waiting = async () => (await queue.getJobCounts("wait")).wait ?? 0;

const budget = config.REDIS_MEMORY_MAX_RATIO * MAXMEMORY - (await usedMemory());
const rows: string[] = [];
for (const rate of rates) {
  const [memBefore, jobsBefore] = [await usedMemory(), await waiting()];
  const load = await runFixedRate(
    {
      urls: [url],
      bodiesFile: "",
      keysFile: "",
      connections: 64,
      durationS: seconds,
      mode: "fixed",
      rate,
    },
    bodies,
    [key],
  );
  const reports = load.ok;
  // What this machine delivered, which can fall short of the rate asked for.
  const achieved = reports / seconds;
  const jobs = (await waiting()) - jobsBefore;
  const bytes = (await usedMemory()) - memBefore;
  const perJob = reports / jobs;
  const bytesPerReport = bytes / reports;
  const bounds = backlogBounds(
    { rate: achieved, reportsPerJob: perJob, bytesPerReport },
    { maxJobs: config.BACKLOG_MAX_JOBS, memoryBudgetBytes: budget },
  );
  rows.push(
    [
      rate,
      Math.round(achieved),
      reports,
      jobs,
      perJob.toFixed(1),
      Math.round(bytesPerReport),
      Math.round(bytes / jobs),
      (bounds.secondsToJobs / 60).toFixed(1),
      (bounds.secondsToMemory / 60).toFixed(1),
      bounds.binds,
      (bounds.seconds / 60).toFixed(1),
    ].join(" | "),
  );
}
process.stdout.write(
  `BACKLOG_MAX_JOBS=${config.BACKLOG_MAX_JOBS}, maxmemory 2 GiB x REDIS_MEMORY_MAX_RATIO=${config.REDIS_MEMORY_MAX_RATIO} (${(budget / 1024 ** 2).toFixed(0)} MiB free at start), ${seconds} s per rate\n` +
    "| reports/s asked | reports/s taken | reports | jobs | reports/job | bytes/report | bytes/job | min to jobs bound | min to memory bound | binds first | outage absorbed (min) |\n" +
    "|---|---|---|---|---|---|---|---|---|---|---|\n" +
    rows.map((r) => `| ${r} |`).join("\n") +
    "\n",
);

await edge.close();
await queue.close();
redis.disconnect();
await redisServer.stop();
rmSync(dir, { recursive: true, force: true });
