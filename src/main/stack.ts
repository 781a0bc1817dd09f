import { createLogger } from "../lib/logger.js";
import { onShutdown } from "../lib/shutdown.js";
import { RedisServerMissingError } from "../local/redis-server.js";
import { curlExample, startLocalStack } from "../local/local-stack.js";

// `npm start`: the local stack in one command.

const logger = createLogger(process.env.LOG_LEVEL ?? "info", "stack");
try {
  const stack = await startLocalStack(process.env, logger);
  onShutdown(logger, () => stack.stop(), 60_000);
  process.stdout.write(
    [
      "",
      "Headroom is starting.",
      `  endpoint:  ${stack.endpoint}`,
      `  project:   ${stack.local.project}`,
      `  key:       ${stack.local.key}`,
      "",
      "Send a report:",
      curlExample(stack.endpoint, stack.local.key),
      "",
      'Then: npx headroom stats    or    npx headroom query "SELECT * FROM headroom.reports_v"',
      "Ctrl-C stops everything; data stays in ./.data.",
      "",
    ].join("\n"),
  );
} catch (err) {
  if (err instanceof RedisServerMissingError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  throw err;
}
