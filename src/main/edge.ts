// First: V8's settings apply to what the other modules allocate.
import "./edge-v8-flags.js";
import type { AddressInfo } from "node:net";
import { loadConfig } from "../config.js";
import { createEdge } from "../edge/create-edge.js";
import { createLogger } from "../lib/logger.js";
import { onShutdown, stopWithParent } from "../lib/shutdown.js";
import { describeTopology, redisTopology } from "../redis/topology.js";

// Edge process: read config, build clients, listen, handle signals.

const config = loadConfig();
const logger = createLogger(config.LOG_LEVEL, "edge");
stopWithParent(logger, config.STOP_WITH_PARENT_PID);
const edge = await createEdge(config, logger);
onShutdown(logger, () => edge.close());
await edge.app.listen({ host: config.HOST, port: config.PORT });
let metricsPort: number | undefined;
if (edge.metricsApp) {
  await edge.metricsApp.listen({ host: config.HOST, port: config.METRICS_PORT });
  metricsPort = (edge.metricsApp.server.address() as AddressInfo).port;
}
logger.info({ redis: describeTopology(redisTopology(config)), metricsPort }, "edge ready");
