import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { configSchema } from "../src/config.js";
import { createKeyStore } from "../src/keys/key-store.js";
import { ensureBuilt } from "../src/local/entry-command.js";
import { freePort } from "../src/local/redis-server.js";
import { spawnChild } from "./child.js";
import { runCommand } from "./cleanup.js";
import { summarize } from "./figure.js";
import { describeShares, freshnessShares } from "./freshness-shares.js";
import { measureHeadroomCeiling } from "./headroom-ceiling.js";
import { commandLine } from "./options.js";
import { runEndToEndPhase } from "./phase-e2e.js";
import { mergesSettled } from "./phase-views.js";
import { cpuMeter, machine } from "./proc-stats.js";
import { latencyText } from "./read-answers.js";
import { adviceFigures, readFigures } from "./read-figures.js";
import { probeFreshness } from "./read-freshness.js";
import type { ReadersSpec } from "./read-load.js";
import { READ_PROJECT, seedReports } from "./read-seed.js";
import { CLOSED_TARGETS, dashboardTargets, PAGE_RANGES, targetUrl } from "./read-targets.js";
import { type TouchResult, touchProjects } from "./read-touch.js";
import { renderFigures } from "./render.js";
import { writeLoadFiles } from "./report-bodies.js";
import { runReadersProcess, runWrkReaders } from "./run-readers.js";
import { BENCH_DB, startStack } from "./stack.js";

// `npm run bench:read`: the read API under load. Stored history is seeded by direct inserts
// (read-seed.ts), then ingest runs at a fixed rate through an edge and a worker twice, once
// alone and once with `--readers` readers on the projects' read keys (`--model`; read-load.ts, in
// a process of their own): closed loops of /api/v1/headroom and the rolling 24 h of
// /api/v1/usage by minute, or pages polling what the page polls, beside `--rolling-readers` API
// clients polling that rolling query (read-targets.ts). Reported: the readers' p50/p99 per
// endpoint, freshness, ingest's end-to-end rate and lag in both runs, and the cores each process
// used.

const { values } = parseArgs({
  options: {
    reports: { type: "string", default: "10000000" },
    projects: { type: "string", default: "50" },
    days: { type: "string", default: "30" },
    duration: { type: "string", default: "15" },
    rate: { type: "string", default: "2000" },
    readers: { type: "string", default: "50" },
    // Dashboards only: how many of the readers also poll /usage?window=minute (rolling 24 h), as
    // an API client would, every 6 s (0: none).
    "rolling-readers": { type: "string", default: "5" },
    // Dashboards only: the page's range (1h, 6h, 24h, 7d, 30d). The page opens on the smallest
    // that holds the last 7 days' reports (fitRange): 7d for a project busy all week.
    "page-range": { type: "string", default: "24h" },
    // Issue 44: a third run, these clients asking /api/v1/advice at this rate in all (open loop)
    // while ingest runs at --rate; 0 readers skips it.
    "advice-readers": { type: "string", default: "200" },
    "advice-rate": { type: "string", default: "2000" },
    // "advice": the advice run and its ceiling only (no ingest alone, no /headroom readers);
    // "headroom": /headroom's ceiling only (no ingest, no readers), e.g. to profile it.
    only: { type: "string", default: "" },
    // CPU profile of the read API (node --cpu-prof) in <out>/profiles/api.
    profile: { type: "boolean", default: false },
    // What the readers accept, as a browser asks; "" for uncompressed answers.
    "accept-encoding": { type: "string", default: "gzip, deflate, br" },
    // The readers' projects get a report per series this often, in both runs (0: none; read-touch.ts).
    "touch-every-ms": { type: "string", default: "1000" },
    // Decode every n-th compressed answer after timing it (1: all; read-load.ts says why).
    "decode-every": { type: "string", default: "20" },
    // closed: readers ask again as soon as answered; dashboards: readers poll as the page does.
    model: { type: "string", default: "closed" },
    // Closed loops only: node (read-load.ts, decodes 1 answer in --decode-every) or wrk
    // (run-readers.ts, a tenth of the CPU per request, decodes none).
    client: { type: "string", default: "node" },
    // Runs go to bench/runs (ignored); the figures docs/benchmarks.md quotes are in bench/results.
    out: { type: "string", default: "bench/runs" },
  },
});
const opts = {
  reports: Number(values.reports),
  projects: Number(values.projects),
  days: Number(values.days),
  durationS: Number(values.duration),
  rate: Number(values.rate),
  readers: Number(values.readers),
  decodeEvery: Number(values["decode-every"]),
};
if (values.model !== "closed" && values.model !== "dashboards") {
  process.stderr.write("--model: closed or dashboards, please\n");
  process.exit(2);
}
if (values.client !== "node" && !(values.client === "wrk" && values.model === "closed")) {
  process.stderr.write("--client: node, or wrk with --model closed, please\n");
  process.exit(2);
}
const advice = {
  readers: values.only === "headroom" ? 0 : Number(values["advice-readers"]),
  rate: Number(values["advice-rate"]),
};
if (!Number.isInteger(advice.readers) || advice.readers < 0 || !(advice.rate > 0)) {
  process.stderr.write("--advice-readers: a whole number (0: none); --advice-rate: above 0\n");
  process.exit(2);
}
const adviceOnly = values.only === "advice";
const headroomOnly = values.only === "headroom";
if (values.only !== "" && !adviceOnly && !headroomOnly) {
  process.stderr.write("--only: advice or headroom (or not given), please\n");
  process.exit(2);
}
if (adviceOnly && advice.readers === 0) {
  process.stderr.write("--only advice needs --advice-readers above 0\n");
  process.exit(2);
}
const rollingReaders = Number(values["rolling-readers"]);
if (!Number.isInteger(rollingReaders) || rollingReaders < 0) {
  process.stderr.write("--rolling-readers: a whole number (0: none), please\n");
  process.exit(2);
}
const pageRange = values["page-range"] as string;
if (!(PAGE_RANGES as readonly string[]).includes(pageRange)) {
  process.stderr.write(`--page-range: one of ${PAGE_RANGES.join(", ")}, please\n`);
  process.exit(2);
}
const touchEveryMs = Number(values["touch-every-ms"]);
if (!Number.isInteger(touchEveryMs) || touchEveryMs < 0) {
  process.stderr.write("--touch-every-ms: a whole number of ms (0: none), please\n");
  process.exit(2);
}
for (const [name, v] of Object.entries(opts)) {
  if (!Number.isInteger(v) || v < 1) {
    process.stderr.write(`--${name}: a positive integer, please\n`);
    process.exit(2);
  }
}

const READ_TARGETS =
  values.model === "dashboards"
    ? dashboardTargets(Math.min(rollingReaders, opts.readers), pageRange)
    : CLOSED_TARGETS;
// A series every seeded project has (read-seed.ts: openai × small × chat among its 16).
const ADVICE_PATH = "/api/v1/advice?provider=openai&model=small&app=chat";

const log = (msg: string) =>
  process.stderr.write(`[bench:read ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

ensureBuilt();
await runCommand(log, async (cleanup) => {
  const started = new Date();
  const stack = await startStack({ cleanup, log });
  log(`seeding ${opts.reports} reports over ${opts.days} days for ${opts.projects} projects`);
  const seed = await seedReports(
    stack.ch,
    { reports: opts.reports, projects: opts.projects, days: opts.days, now: Date.now() },
    log,
  );
  log(`  ${seed.seconds} s`);
  // A deployment holding 10 M reports is not merging 10 M rows it took a minute ago: the seed's
  // merges (most of a core of ClickHouse's for minutes) are waited out, so that the phases
  // measure ingest and readers, not the seed (issue 48).
  const mergesFrom = performance.now();
  await mergesSettled(
    async <T>(sql: string, params?: Record<string, unknown>) =>
      (await stack.ch.query({ query: sql, query_params: params, format: "JSONEachRow" })).json<T>(),
    BENCH_DB,
    900,
  );
  log(`  the seed's merges settled in ${Math.round((performance.now() - mergesFrom) / 1000)} s`);

  const keyStore = createKeyStore(stack.admin);
  const readKeys: string[] = [];
  // Report keys of the same projects, for the touches (read-touch.ts).
  const touchKeys: string[] = [];
  for (let i = 0; i < opts.projects; i++) {
    const project = READ_PROJECT(i);
    readKeys.push(
      (await keyStore.create(project, { defaultPlan: "unlimited", scope: "read" })).key,
    );
    touchKeys.push(
      (await keyStore.create(project, { plan: "unlimited", defaultPlan: "unlimited" })).key,
    );
  }
  const ingestKeys = {
    alone: await stack.createKeys("ra", opts.projects),
    readers: await stack.createKeys("rb", opts.projects),
    advice: await stack.createKeys("rc", opts.projects),
  };
  const edges = await stack.startEdges(1);
  await stack.startWorkers(1);
  const apiPort = await freePort();
  const outDir = resolve(values.out as string);
  const profileDir = join(outDir, "profiles", "api");
  if (values.profile) mkdirSync(profileDir, { recursive: true });
  const api = spawnChild({
    name: "api",
    entry: "src/main/api.ts",
    nodeArgs: values.profile ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [],
    // The readers measure the queries, not the per-key limit: room for all of them.
    env: {
      ...stack.env,
      HOST: "127.0.0.1",
      API_PORT: String(apiPort),
      READ_RATE_PER_S: "100000",
      READ_BURST: "100000",
      // Keys not yet cached each hold an authentication attempt while looked up: 50 readers
      // starting at once from one IP would be over the per-IP failure limit.
      AUTH_FAILURES_PER_IP: "100000",
    },
    cleanup,
    onUnexpectedExit: log,
  });
  await api.waitFor(/read api ready/, 60_000);
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  // The seed went straight into ClickHouse, past the workers that keep the hot headroom in
  // Redis: each project's first /headroom refills it from ClickHouse (as after a Redis wipe).
  // Done before the measured runs, and timed apart.
  const refillStarted = performance.now();
  await Promise.all(
    readKeys.map(async (key) => {
      const res = await fetch(`${apiUrl}/api/v1/headroom`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const body = await res.text();
      if (res.status !== 200) throw new Error(`headroom refill: HTTP ${res.status} ${body}`);
    }),
  );
  const refillS = Math.round((performance.now() - refillStarted) / 100) / 10;
  log(`hot headroom refilled from ClickHouse for ${opts.projects} projects in ${refillS} s`);

  const ingest = (
    phase: "ra" | "rb" | "rc",
    keys: string[],
    beside?: () => Promise<{ rows: number }>,
  ) =>
    runEndToEndPhase(
      stack,
      edges,
      {
        phase,
        files: writeLoadFiles(stack.dir, phase, keys),
        connections: 64,
        durationS: opts.durationS,
        mode: "fixed",
        rate: opts.rate,
        timeoutS: 180,
        beside,
      },
      cleanup,
    );

  // Cores of the API beside the rest (the readers measure their own: `clientCores`).
  const meter = () =>
    cpuMeter({
      api: api.pid,
      bench: process.pid,
      ...Object.fromEntries(edges.map((e) => [e.name, e.pid])),
      ...Object.fromEntries(stack.workers().map((w) => [w.name, w.pid])),
      clickhouse: stack.clickhouse.process.pid ?? 0,
      ...stack.redisPids(),
    });

  // The touches run in all runs: ingest with readers is compared with the same load without.
  // They go through the phase's edge, which starts them once its count before has settled and
  // takes them from what it enqueued; `touched` has their figures once the phase is done.
  const touch = () => {
    let started: Promise<TouchResult> | undefined;
    const start = () => {
      started =
        touchEveryMs > 0
          ? touchProjects({
              edgeUrl: (edges[0] as { url: string }).url,
              keys: touchKeys,
              durationS: opts.durationS,
              everyMs: touchEveryMs,
            })
          : Promise.resolve({ inserts: 0, rows: 0, failed: 0 });
      return started;
    };
    const touched = async () => (await started) ?? { inserts: 0, rows: 0, failed: 0 };
    return { start, touched };
  };
  const readersSpec: ReadersSpec = {
    url: apiUrl,
    keys: readKeys,
    readers: opts.readers,
    durationS: opts.durationS,
    targets: READ_TARGETS,
    acceptEncoding: values["accept-encoding"] as string,
    decodeEvery: opts.decodeEvery,
    model: values.model as "closed" | "dashboards",
  };
  // The /headroom and /usage runs (ingest alone, then beside readers); `--only advice` skips them.
  const runs =
    adviceOnly || headroomOnly
      ? null
      : await (async () => {
          log(`ingest alone: ${opts.rate}/s for ${opts.durationS} s`);
          const scrapeWorkers = () => Promise.all(stack.workers().map((w) => w.metrics()));
          const aloneBefore = await scrapeWorkers();
          const aloneCpu = meter();
          const alone = await ingest("ra", ingestKeys.alone, touch().start);
          const aloneCores = aloneCpu.read().cores;
          const aloneShares = freshnessShares(aloneBefore, await scrapeWorkers());
          log(`  sustained ${alone.sustainedPerSec}/s, lag p99 ${alone.lagMs.p99} ms`);
          log("  a report's way through the worker (its histograms over the run):");
          for (const line of describeShares(aloneShares)) log(line);

          log(
            `ingest with ${opts.readers} readers (${values.model}): ${opts.rate}/s for ${opts.durationS} s`,
          );
          // The freshness probe's project is one of the phase's (`bench-rb-…`), so that its reports are
          // counted among the phase's stored rows, as the edge counts them among those it enqueued.
          const probe = {
            report: (
              await keyStore.create("bench-rb-probe", {
                plan: "unlimited",
                defaultPlan: "unlimited",
              })
            ).key,
            read: (
              await keyStore.create("bench-rb-probe", { defaultPlan: "unlimited", scope: "read" })
            ).key,
          };
          // Dashboards that poll find their answers cached: one cold request per project and endpoint
          // first (timed apart), as a steady state of polling has them; only what each reader
          // polls (the rolling minute answers of all 50 projects would fill /usage's cache and
          // push out the page's answers, as no steady state does).
          const warmStarted = performance.now();
          await Promise.all(
            readKeys.flatMap((key, r) =>
              READ_TARGETS.filter((t) => r < (t.readers ?? opts.readers)).map(async (t) => {
                const res = await fetch(`${apiUrl}${targetUrl(t)}`, {
                  headers: { authorization: `Bearer ${key}` },
                });
                await res.arrayBuffer();
              }),
            ),
          );
          const coldS = Math.round((performance.now() - warmStarted) / 100) / 10;
          log(`  cold: one request per project and endpoint answered in ${coldS} s`);
          const stagesBefore = await scrapeWorkers();
          const readersCpu = meter();
          const readersTouch = touch();
          const [withReaders, reads, freshness] = await Promise.all([
            ingest("rb", ingestKeys.readers, readersTouch.start),
            values.client === "wrk"
              ? runWrkReaders(readersSpec, stack.dir, cleanup)
              : runReadersProcess(readersSpec, cleanup),
            probeFreshness({
              edgeUrl: (edges[0] as { url: string }).url,
              apiUrl,
              reportKey: probe.report,
              readKey: probe.read,
              durationS: opts.durationS,
            }),
          ]);
          const touched = await readersTouch.touched();
          const readersCores = readersCpu.read().cores;
          const shares = freshnessShares(stagesBefore, await scrapeWorkers());
          log(`  sustained ${withReaders.sustainedPerSec}/s, lag p99 ${withReaders.lagMs.p99} ms`);
          log(
            `  freshness (edge 200 → /headroom shows it): ${freshness.probes} probes, p50 ${freshness.latencyMs.p50} ms, p99 ${freshness.latencyMs.p99} ms, max ${freshness.latencyMs.max} ms, missed ${freshness.missed}`,
          );
          log("  its shares (the workers' histograms over the run; the probe's own timings):");
          for (const line of describeShares(shares)) log(line);
          log(
            `    api: p50 ${freshness.apiMs.p50} ms, max ${freshness.apiMs.max} ms — the read that showed it (polls 20 ms apart)`,
          );
          log(
            `    (before the 200) edge: p50 ${freshness.edgeMs.p50} ms, max ${freshness.edgeMs.max} ms — the probe's POST, its group commit included`,
          );
          for (const [name, r] of Object.entries(reads.byEndpoint)) {
            log(
              `  ${name} (${r.readers} readers): ${r.perSec} req/s, ${latencyText(r)}, statuses ${JSON.stringify(r.statuses)}, bytes ${JSON.stringify(r.bytes)}`,
            );
          }
          log(
            `  readers' projects touched: ${touched.rows} reports in ${touched.inserts} batches through the edge, ${touched.failed} failed`,
          );
          log(`  cores used, ingest alone: ${JSON.stringify(aloneCores)}`);
          log(
            `  cores used, with readers: ${JSON.stringify(readersCores)}, readers ${reads.clientCores}`,
          );

          return {
            alone,
            aloneCores,
            aloneShares,
            withReaders,
            reads,
            freshness,
            shares,
            touched,
            readersCores,
            coldS,
          };
        })();

  // Issue 44: advice asked by many clients at a fixed rate in all, while ingest runs; and how soon
  // an advice answer reflects a report (the freshness probe, on advice).
  let adviceRun: {
    reads: Awaited<ReturnType<typeof runReadersProcess>>;
    freshness: Awaited<ReturnType<typeof probeFreshness>>;
    ingest: { sustainedPerSec: number; storedPerSec: number; lagMs: unknown };
    cpuCores: Record<string, number>;
  } | null = null;
  if (advice.readers > 0) {
    log(
      `ingest with ${advice.readers} advice clients at ${advice.rate}/s in all: ${opts.rate}/s for ${opts.durationS} s`,
    );
    const adviceProbe = {
      report: (
        await keyStore.create("bench-rc-probe", { plan: "unlimited", defaultPlan: "unlimited" })
      ).key,
      read: (await keyStore.create("bench-rc-probe", { defaultPlan: "unlimited", scope: "read" }))
        .key,
    };
    const adviceCpu = meter();
    const [ingested, adviceReads, adviceFreshness] = await Promise.all([
      ingest("rc", ingestKeys.advice, touch().start),
      runReadersProcess(
        {
          ...readersSpec,
          readers: advice.readers,
          // Open loop, each client on one key: readers × (1000 / everyMs) = the rate in all.
          model: "dashboards",
          targets: [
            { name: "advice", path: ADVICE_PATH, everyMs: (advice.readers * 1000) / advice.rate },
          ],
        },
        cleanup,
        // 2,000/s asked of an API that answers fewer waits for every late answer.
        600,
      ),
      probeFreshness({
        edgeUrl: (edges[0] as { url: string }).url,
        apiUrl,
        reportKey: adviceProbe.report,
        readKey: adviceProbe.read,
        durationS: opts.durationS,
        reads: "advice",
      }),
    ]);
    adviceRun = {
      reads: adviceReads,
      freshness: adviceFreshness,
      ingest: {
        sustainedPerSec: ingested.sustainedPerSec,
        storedPerSec: ingested.storedPerSec,
        lagMs: ingested.lagMs,
      },
      cpuCores: adviceCpu.read().cores,
    };
    const a = adviceReads.byEndpoint.advice;
    log(
      `  advice: ${a?.perSec} req/s, ${a ? latencyText(a) : "no answers"}, statuses ${JSON.stringify(a?.statuses)}; ingest sustained ${ingested.sustainedPerSec}/s`,
    );
    log(
      `  freshness (edge 200 → advice shows it): ${adviceFreshness.probes} probes, p50 ${adviceFreshness.latencyMs.p50} ms, max ${adviceFreshness.latencyMs.max} ms, missed ${adviceFreshness.missed}`,
    );
  }

  // Ingest has stopped: the API and a bare route sending the same bytes, each alone.
  const headroomCeiling =
    runs || headroomOnly
      ? await (async () => {
          log(
            `/api/v1/headroom against a bare route sending its bytes: wrk, ${opts.readers} connections`,
          );
          return measureHeadroomCeiling(
            {
              apiUrl,
              apiPid: api.pid,
              keys: readKeys,
              dir: stack.dir,
              connections: opts.readers,
              durationS: opts.durationS,
              warmupS: 3,
              acceptEncoding: values["accept-encoding"] as string,
              profileDir: values.profile ? join(outDir, "profiles", "bare") : undefined,
            },
            cleanup,
          );
        })()
      : null;
  let adviceCeiling: Awaited<ReturnType<typeof measureHeadroomCeiling>> | null = null;
  if (adviceRun) {
    log(`/api/v1/advice against a bare route sending its bytes: wrk, ${opts.readers} connections`);
    adviceCeiling = await measureHeadroomCeiling(
      {
        apiUrl,
        apiPid: api.pid,
        keys: readKeys,
        dir: stack.dir,
        connections: opts.readers,
        durationS: opts.durationS,
        warmupS: 3,
        acceptEncoding: values["accept-encoding"] as string,
        path: ADVICE_PATH,
        name: "advice",
      },
      cleanup,
    );
  }
  const figures = [
    ...(headroomCeiling ? readFigures(headroomCeiling, runs?.reads ?? null, opts.rate) : []),
    ...(adviceRun && adviceCeiling
      ? adviceFigures(adviceCeiling, adviceRun.reads, adviceRun.freshness, {
          ingest: opts.rate,
          advice: advice.rate,
        })
      : []),
  ];
  const command = commandLine("bench:read", process.argv.slice(2));

  const results = {
    machine: machine(started),
    command,
    options: {
      ...opts,
      model: values.model,
      rollingReaders: values.model === "dashboards" ? rollingReaders : null,
      pageRange: values.model === "dashboards" ? values["page-range"] : null,
      client: values.client,
      acceptEncoding: values["accept-encoding"],
      touchEveryMs,
      adviceReaders: advice.readers,
      adviceRate: advice.rate,
      only: values.only || null,
    },
    settings: {
      ...stack.settings,
      READ_CACHE_TTL_MS:
        stack.env.READ_CACHE_TTL_MS ?? String(configSchema.parse({}).READ_CACHE_TTL_MS),
      READ_CACHE_STALE_MS:
        stack.env.READ_CACHE_STALE_MS ?? String(configSchema.parse({}).READ_CACHE_STALE_MS),
    },
    seed,
    hotRefillS: refillS,
    coldS: runs?.coldS ?? null,
    ingestAlone: runs && {
      shares: runs.aloneShares,
      sustainedPerSec: runs.alone.sustainedPerSec,
      storedPerSec: runs.alone.storedPerSec,
      lagMs: runs.alone.lagMs,
    },
    ingestWithReaders: runs && {
      sustainedPerSec: runs.withReaders.sustainedPerSec,
      storedPerSec: runs.withReaders.storedPerSec,
      lagMs: runs.withReaders.lagMs,
    },
    reads: runs?.reads ?? null,
    freshness: runs ? { ...runs.freshness, shares: runs.shares } : null,
    touched: runs?.touched ?? null,
    // Cores used on average (the API, this process with the readers, the stack, the machine).
    cpuCores: runs && { ingestAlone: runs.aloneCores, withReaders: runs.readersCores },
    headroomCeiling,
    advice: adviceRun ? { ...adviceRun, ceiling: adviceCeiling } : null,
    figures,
    summary: summarize(figures),
  };
  mkdirSync(outDir, { recursive: true });
  const file = join(outDir, "read-latest.json");
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  const invalid = results.summary.invalid;
  const md = [
    `- Command: \`${command}\``,
    ...(invalid > 0
      ? [`- **${invalid} figures invalid**: measured over failed answers (struck out, with why)`]
      : []),
    "",
    ...renderFigures(figures),
    "",
  ].join("\n");
  writeFileSync(join(outDir, "read-latest.md"), md);
  process.stdout.write(`${JSON.stringify(results, null, 2)}\n\n${md}`);
  log(`wrote ${file} and read-latest.md`);
});
