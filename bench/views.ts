import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClickHouse } from "../src/clickhouse/client.js";
import { loadConfig } from "../src/config.js";
import { spawnEmbeddedClickHouse } from "../src/local/clickhouse/process.js";
import type { Cleanup } from "./cleanup.js";
import type { BenchOptions } from "./options.js";
import { runViewsPhase, type ViewsOptions, type ViewsPhase } from "./phase-views.js";
import { type Machine, machine } from "./proc-stats.js";
import { renderRunInfo, renderViewsFigures } from "./render.js";
import type { RunInfo } from "./run-results.js";
import { sourceInfo } from "./source.js";
import { settingsFromEnv } from "./stack.js";

// `npm run bench -- --only clickhouse`: the views' cost alone (phase-views.ts), on an embedded
// ClickHouse server of its own, without the rest of the stack: a minute instead of the whole run.

export interface ViewsResults extends RunInfo {
  version: 1;
  views: ViewsPhase;
}

/** The phase's options from the run's: the worker's batch size (BATCH_MAX_ROWS), fewer with --quick. */
export function viewsOptions(opts: BenchOptions, rowsPerInsert: number): ViewsOptions {
  return {
    rowsPerInsert,
    insertsPerRound: opts.quick ? 1 : 2,
    rounds: opts.quick ? 2 : 6,
    projects: 8,
    mergeTimeoutS: opts.quick ? 20 : 60,
  };
}

export async function runViewsAlone(
  opts: BenchOptions,
  cleanup: Cleanup,
  log: (msg: string) => void,
  command: string,
): Promise<ViewsResults> {
  const started = new Date();
  const source = sourceInfo();
  const dir = mkdtempSync(join(tmpdir(), "headroom-bench-views-"));
  cleanup.add("remove temp dir", () => rmSync(dir, { recursive: true, force: true }));
  const clickhouse = await spawnEmbeddedClickHouse({ path: join(dir, "clickhouse") });
  cleanup.add("stop embedded clickhouse", () => clickhouse.stop());
  const config = loadConfig({ ...settingsFromEnv(), CLICKHOUSE_URL: clickhouse.url });
  const ch = createClickHouse({ ...config, CLICKHOUSE_REQUEST_TIMEOUT_MS: 120_000 });
  cleanup.add("close clickhouse client", () => ch.close());
  log(`embedded ClickHouse on ${clickhouse.url}`);
  const phaseOptions = viewsOptions(opts, config.BATCH_MAX_ROWS);
  log(
    `views' cost: ${phaseOptions.rounds} rounds of ${phaseOptions.insertsPerRound} inserts of ${phaseOptions.rowsPerInsert} rows per database`,
  );
  const views = await runViewsPhase(ch, clickhouse.process.pid ?? 0, phaseOptions, log);
  return {
    version: 1,
    machine: machine(started),
    command,
    source,
    options: { quick: opts.quick, ...phaseOptions },
    settings: settingsFromEnv(),
    views,
  };
}

export function renderViewsMarkdown(r: ViewsResults): string {
  const m: Machine = r.machine;
  return [
    `# ClickHouse's views, ${m.date}`,
    "",
    ...renderRunInfo(r),
    "",
    ...renderViewsFigures(r.views.figures, r.views.rowsPerInsert),
    "",
  ].join("\n");
}
