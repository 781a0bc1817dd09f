import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AlertsWorker, createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { createDeclarationsReader } from "../../src/control/declarations-cache.js";
import { createLogger } from "../../src/lib/logger.js";
import { createIngestWorker, type IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { type AlertsFixture, alertsFixture } from "./alerts-fixture.js";
import { type Pipeline, startPipeline } from "./pipeline.js";

// The alerts pipeline the alerts tests run on: a pipeline (Redis, ClickHouse) with the given
// settings, the alerts worker (and, when reports must flow, an ingest worker) started on it, and
// the `headroom alerts` command line pointed at it, with a data directory of its own.

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface AlertsStack {
  p: Pipeline;
  fx: AlertsFixture;
  alerts: AlertsWorker;
  /** Started with `{ ingest: true }`: reports sent to the queue reach ClickHouse and the rules. */
  ingest: IngestWorker | null;
  /** `headroom alerts …` as an operator runs it on this stack; `env` adds to its settings. */
  cli(args: string[], env?: Record<string, string>): Promise<CliRun>;
  /** `headroom alerts add` of a requests rule (warn 70, critical 90), `args` added, as JSON. */
  addRule(
    project: string,
    webhook: string,
    opts?: { args?: string[]; env?: Record<string, string> },
  ): Promise<CliRun>;
  close(): Promise<void>;
}

/** The settings the command line takes from the pipeline. */
const CLI_SETTINGS = [
  "REDIS_URL",
  "QUEUE_PREFIX",
  "CLICKHOUSE_URL",
  "CLICKHOUSE_DATABASE",
  "ALERTS_WEBHOOK_ALLOW",
];

export async function startAlertsStack(
  settings: Record<string, string>,
  opts: { ingest?: boolean } = {},
): Promise<AlertsStack> {
  const p = await startPipeline(settings);
  const fx = alertsFixture(p);
  const logger = createLogger("silent", "test");
  const deps = { config: p.config, redis: p.redis, clickhouse: p.client, logger };
  const ingest = opts.ingest
    ? createIngestWorker({ ...deps, metrics: createWorkerMetrics() })
    : null;
  const alerts = createAlertsWorker({
    ...deps,
    declarations: createDeclarationsReader(p.redis, p.config.QUEUE_PREFIX),
  });
  ingest?.start();
  alerts.start();
  const dataDir = mkdtempSync(join(tmpdir(), "headroom-alerts-"));

  const stack: AlertsStack = {
    p,
    fx,
    alerts,
    ingest,
    addRule: (project, webhook, opts = {}) =>
      stack.cli(
        [
          "add",
          ...["--project", project, "--metric", "requests", "--warn", "70", "--critical", "90"],
          ...["--webhook", webhook, ...(opts.args ?? []), "--json"],
        ],
        opts.env,
      ),
    cli(args, env = {}) {
      const full: Record<string, string> = {
        ...(process.env as Record<string, string>),
        HEADROOM_DATA_DIR: dataDir,
      };
      for (const k of CLI_SETTINGS) full[k] = p.env[k] as string;
      return new Promise((resolve) => {
        execFile(
          process.execPath,
          ["bin/headroom.mjs", "alerts", ...args],
          { env: { ...full, ...env }, timeout: 60_000 },
          (err, stdout, stderr) => {
            const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
            resolve({ code, stdout, stderr });
          },
        );
      });
    },
    async close() {
      await ingest?.close();
      await alerts.close();
      await fx.close();
      await p.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return stack;
}
