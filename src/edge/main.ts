import { loadConfig } from "../config.js";
import { createLogger } from "../lib/logger.js";
import { onShutdown } from "../lib/shutdown.js";
import { redactUrl } from "../redis/connections.js";
import { createEdge } from "./create-edge.js";

// Edge process: read config, build clients, listen, handle signals.

const config = loadConfig();
const logger = createLogger(config.LOG_LEVEL, "edge");
const edge = await createEdge(config, logger);
onShutdown(logger, () => edge.close());
await edge.app.listen({ host: config.HOST, port: config.PORT });
logger.info({ redis: redactUrl(config.REDIS_URL) }, "edge ready");
