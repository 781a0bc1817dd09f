import { ConfigError, isSet, loadConfig } from "../config.js";
import { createLogger } from "../lib/logger.js";
import { stopWhenParentExits } from "../lib/parent-watch.js";
import { onShutdown } from "../lib/shutdown.js";
import { curlExample, pageUrl, startLocalStack } from "../local/local-stack.js";
import { assertPortsFree, PortTakenError, stackListeners } from "../local/ports-free.js";
import { RedisServerMissingError } from "../local/redis-server.js";

// `npm start`: the local stack in one command.

try {
  const config = loadConfig();
  const logger = createLogger(config.LOG_LEVEL, "stack");
  await assertPortsFree(stackListeners(config));
  const stack = await startLocalStack(
    {
      config,
      // A Redis of our own unless one is named, in any topology.
      ownRedis: !(["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS"] as const).some((name) =>
        isSet(process.env, name),
      ),
      // The stack cannot serve without it: stop everything, and say so with the exit code.
      onChildGaveUp: () => void stack.stop().finally(() => process.exit(1)),
    },
    logger,
  );
  // Ctrl-C reaches npm and this process both, and npm passes its own on: one request to stop.
  onShutdown(logger, () => stack.stop(), 60_000, { sameRequestMs: 2_000 });
  // `npm start` killed by SIGHUP (a closed terminal) or SIGKILL passes nothing on.
  stopWhenParentExits(() => process.kill(process.pid, "SIGTERM"));
  // The CLI finds this stack through HEADROOM_DATA_DIR: a non-default one must be passed along.
  const cli = isSet(process.env, "HEADROOM_DATA_DIR")
    ? `HEADROOM_DATA_DIR=${config.HEADROOM_DATA_DIR} npx headroom`
    : "npx headroom";
  process.stdout.write(
    [
      "",
      "Headroom is starting.",
      `  endpoint:  ${stack.endpoint}`,
      `  project:   ${stack.local.project}`,
      `  key:       ${stack.local.key}`,
      `  read API:  ${stack.readApi}`,
      `  read key:  ${stack.local.read_key}`,
      "",
      // The key rides in the fragment, which the browser keeps to itself; the page moves it to
      // the tab's session storage and clears it from the address bar.
      "Open the headroom page (signed in with the read key):",
      `  ${pageUrl(stack.page, stack.local.read_key)}`,
      "",
      "Send a report:",
      curlExample(stack.endpoint, stack.local.key),
      "",
      "Read it back:",
      `curl -sS ${stack.readApi}/headroom -H 'Authorization: Bearer ${stack.local.read_key}'`,
      "",
      ...(stack.controlApi
        ? [
            `Control plane (projects, keys, alert rules, audit; docs/control-plane.md): ${stack.controlApi}`,
            `  with an admin key from: ${cli} keys create --scope admin`,
            "",
          ]
        : []),
      `Then: ${cli} stats    or    ${cli} query "SELECT * FROM reports_v"`,
      `Ctrl-C stops everything; data stays in ${config.HEADROOM_DATA_DIR}.`,
      "",
    ].join("\n"),
  );
} catch (err) {
  // What the user can fix is said in one message, without a stack trace.
  if (
    err instanceof RedisServerMissingError ||
    err instanceof ConfigError ||
    err instanceof PortTakenError
  ) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  throw err;
}
