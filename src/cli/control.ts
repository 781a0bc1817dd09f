import type { Config } from "../config.js";
import { type Control, cliPrincipal, createControl, type Principal } from "../control/service.js";
import { HttpError } from "../http/errors.js";
import type { RedisClient } from "../redis/connections.js";
import { cliConfig } from "./context.js";
import { UsageError } from "./errors.js";
import { closeRedis, connectRedis } from "./redis.js";

// The CLI's management commands run the control plane's own functions (src/control/), as the
// CLI's principal: "cli" and the OS user in the audit log. Their refusals are usage errors.

export async function withControl<T>(
  run: (control: Control, cli: Principal, config: Config, redis: RedisClient) => Promise<T>,
): Promise<T> {
  const config = cliConfig();
  const redis = await connectRedis(config);
  try {
    return await run(createControl(redis, config), cliPrincipal(), config, redis);
  } catch (err) {
    throw err instanceof HttpError && err.status < 500 ? new UsageError(err.message) : err;
  } finally {
    await closeRedis(redis);
  }
}
