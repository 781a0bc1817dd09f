import { resolve } from "node:path";
import { loadConfig } from "../../config.js";
import { createLogger } from "../../lib/logger.js";
import { onShutdown, stopWithParent } from "../../lib/shutdown.js";
import { startEmbeddedClickHouse } from "./server.js";

// `headroom clickhouse serve`: the process that owns an embedded ClickHouse data directory and
// serves it over ClickHouse's HTTP interface. Runs until SIGTERM/SIGINT, then closes the engine
// cleanly and exits 0. The data directory, credentials and log level come from the config.

export interface ServeOptions {
  /** Default: CLICKHOUSE_PATH. */
  path?: string;
  port: number;
  host: string;
  /** Share of queries that fail on purpose (tests); 0 for none. */
  faultErrorRate: number;
}

export async function serveClickHouse(opts: ServeOptions): Promise<void> {
  const config = loadConfig();
  // Like the official server image: UTC unless the environment says otherwise. Set before the
  // engine starts, which reads the zone once.
  process.env.TZ ||= "UTC";
  const logger = createLogger(config.LOG_LEVEL, "clickhouse");
  stopWithParent(logger, config.STOP_WITH_PARENT_PID);
  const path = resolve(opts.path ?? config.CLICKHOUSE_PATH);
  const server = await startEmbeddedClickHouse({
    path,
    port: opts.port,
    host: opts.host,
    user: config.CLICKHOUSE_USER,
    password: config.CLICKHOUSE_PASSWORD,
    logger,
    faults: opts.faultErrorRate > 0 ? { errorRate: opts.faultErrorRate } : undefined,
  });
  onShutdown(logger, () => server.close());
  logger.info(
    { url: server.url, path, faultErrorRate: opts.faultErrorRate || undefined },
    "clickhouse ready",
  );
}
