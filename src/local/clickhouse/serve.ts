import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../../config.js";
import { createLogger } from "../../lib/logger.js";
import { onShutdown } from "../../lib/shutdown.js";
import { startEmbeddedClickHouse } from "./server.js";

// `headroom clickhouse serve`: the process that owns an embedded ClickHouse data directory and
// serves it over ClickHouse's HTTP interface. Runs until SIGTERM/SIGINT, then closes the engine
// cleanly and exits 0. The data directory, credentials and log level come from the config.

export const SERVE_HELP =
  "headroom clickhouse serve [--path DIR] [--port N] [--host H] [--fault-error-rate R]";

export async function serveClickHouse(args: string[]): Promise<void> {
  const config = loadConfig();
  const { values } = parseArgs({
    args,
    options: {
      path: { type: "string", default: config.CLICKHOUSE_PATH },
      port: { type: "string", default: "8123" },
      host: { type: "string", default: "127.0.0.1" },
      "fault-error-rate": { type: "string", default: "0" },
    },
  });
  const port = Number(values.port);
  const errorRate = Number(values["fault-error-rate"]);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new Error(`--port must be an integer 0..65535 (got ${values.port})`);
  }
  if (!(errorRate >= 0 && errorRate <= 1)) {
    throw new Error(
      `--fault-error-rate must be between 0 and 1 (got ${values["fault-error-rate"]})`,
    );
  }
  // Like the official server image: UTC unless the environment says otherwise. Set before the
  // engine starts, which reads the zone once.
  process.env.TZ ||= "UTC";
  const logger = createLogger(config.LOG_LEVEL, "clickhouse");
  const path = resolve(values.path);
  const server = await startEmbeddedClickHouse({
    path,
    port,
    host: values.host,
    user: config.CLICKHOUSE_USER,
    password: config.CLICKHOUSE_PASSWORD,
    logger,
    faults: errorRate > 0 ? { errorRate } : undefined,
  });
  onShutdown(logger, () => server.close());
  logger.info(
    { url: server.url, path, faultErrorRate: errorRate || undefined },
    "clickhouse ready",
  );
}
