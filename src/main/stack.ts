import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { ConfigError, isSet, loadConfig } from "../config.js";
import { createLogger } from "../lib/logger.js";
import { stopWhenParentExits } from "../lib/parent-watch.js";
import { onShutdown } from "../lib/shutdown.js";
import { RedisLeftRunningError, stopRedisLeftOn } from "../local/left-redis.js";
import { curlExample, localRedisOptions, pageUrl, startLocalStack } from "../local/local-stack.js";
import { assertPortsFree, PortTakenError, stackListeners } from "../local/ports-free.js";
import { RedisServerMissingError } from "../local/redis-server.js";
import { claimDataDir, runningStack } from "../local/running-stack.js";
import { openStackLog } from "../local/stack-log.js";

// `npm start`: the local stack in one command. A person reads its terminal: readable lines (or,
// piped, warnings and the banner alone), every process's JSON log in the data directory's
// headroom.log, and the banner once the edge and the read API answer, so its curls work at once.

class AlreadyRunningError extends Error {}

try {
  const config = loadConfig();
  const dataDir = resolve(config.HEADROOM_DATA_DIR);
  const running = runningStack(dataDir);
  if (running !== null) {
    throw new AlreadyRunningError(
      `npm start: Headroom is already running on ${dataDir} (PID ${running}); use it, stop it (Ctrl-C in its terminal, or kill ${running}), or start another with HEADROOM_DATA_DIR=<another directory> and other ports`,
    );
  }
  // A Redis of our own unless one is named, in any topology.
  const ownRedis = !(["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS"] as const).some(
    (name) => isSet(process.env, name),
  );
  // Before the ports are checked: it may hold STACK_REDIS_PORT.
  if (ownRedis) {
    await stopRedisLeftOn(localRedisOptions(config, dataDir).dir, (pid) =>
      process.stdout.write(
        `npm start: the last Headroom on ${dataDir} did not stop cleanly; stopping the redis-server it left running (PID ${pid}) first\n`,
      ),
    );
  }
  await assertPortsFree(stackListeners(config));
  mkdirSync(dataDir, { recursive: true });
  const release = claimDataDir(dataDir);
  process.once("exit", release);
  const log = openStackLog(dataDir, { terminal: { fd: 1, isTTY: process.stdout.isTTY } });
  const logger = createLogger(config.LOG_LEVEL, "stack", log.destination);
  log.say(`Headroom is starting (every process's log: ${log.path}) ...\n`);
  const stack = await startLocalStack(
    {
      config,
      ownRedis,
      // The stack cannot serve without it: stop everything, and say so with the exit code.
      onChildGaveUp: () => void stack.stop().finally(() => process.exit(1)),
      follow: (stdout, stderr) => log.follow(stdout, stderr),
    },
    logger,
  );
  // Ctrl-C reaches npm and this process both, and npm passes its own on: one request to stop.
  onShutdown(
    logger,
    async () => {
      await stack.stop();
      log.say(`Headroom stopped; data stays in ${config.HEADROOM_DATA_DIR}.\n`);
    },
    60_000,
    { sameRequestMs: 2_000 },
  );
  // `npm start` killed by SIGHUP (a closed terminal) or SIGKILL passes nothing on.
  stopWhenParentExits(() => process.kill(process.pid, "SIGTERM"));
  // The banner's curls are for pasting at once: it waits until what they reach answers.
  try {
    await stack.untilServing(120_000);
  } catch (err) {
    logger.fatal({ err }, `Headroom did not start: see ${log.path}`);
    await stack.stop().finally(() => process.exit(1));
  }
  // The CLI finds this stack through HEADROOM_DATA_DIR: a non-default one must be passed along.
  const cli = isSet(process.env, "HEADROOM_DATA_DIR")
    ? `HEADROOM_DATA_DIR=${config.HEADROOM_DATA_DIR} npx headroom`
    : "npx headroom";
  log.say(
    [
      "",
      `Headroom is ready (PID ${process.pid}).`,
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
      `Logs: ${log.path}`,
      `Ctrl-C stops everything; data stays in ${config.HEADROOM_DATA_DIR}.`,
      "",
    ].join("\n"),
  );
} catch (err) {
  // What the user can fix is said in one message, without a stack trace.
  if (
    err instanceof RedisServerMissingError ||
    err instanceof ConfigError ||
    err instanceof PortTakenError ||
    err instanceof AlreadyRunningError ||
    err instanceof RedisLeftRunningError
  ) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  throw err;
}
