import type { AddressInfo } from "node:net";
import { createApi } from "../api/create-api.js";
import { loadConfig } from "../config.js";
import { createLogger } from "../lib/logger.js";
import { onShutdown, stopWithParent } from "../lib/shutdown.js";

// Read API process: read config, build clients, listen, handle signals.

const config = loadConfig();
const logger = createLogger(config.LOG_LEVEL, "api");
stopWithParent(logger, config.STOP_WITH_PARENT_PID);
const api = await createApi(config, logger);
onShutdown(logger, () => api.close());
await api.app.listen({ host: config.HOST, port: config.API_PORT });
logger.info(
  {
    port: (api.app.server.address() as AddressInfo).port,
    control: config.CONTROL_LISTEN === "api" ? "beside the read api" : config.CONTROL_LISTEN,
  },
  "read api ready",
);
if (api.controlApp && typeof config.CONTROL_LISTEN === "number") {
  await api.controlApp.listen({ host: config.HOST, port: config.CONTROL_LISTEN });
  logger.info(
    { port: (api.controlApp.server.address() as AddressInfo).port },
    "control plane ready",
  );
}
