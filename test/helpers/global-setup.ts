import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {} from "vitest";
import type { TestProject } from "vitest/node";
import { ensureBuilt } from "../../src/local/entry-command.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import { acquireEngine, NoEngineError, releaseEngine } from "../docker/engine.js";

// A real Redis for the integration tests, in order of preference: REDIS_URL from the
// environment; a testcontainers `redis:7` container on a Docker engine (the one that answers, or
// a private dockerd that test/docker/engine.sh starts, with a redis:7 image it builds offline
// when the engine has none); a redis-server process on a free port in a temp dir. The machine's
// own Redis on 6379 is never assumed.
//
// HEADROOM_TEST_DOCKER=0 skips containers (redis-server); =1 requires them (no engine is an
// error). Unset: containers when an engine can be had; where none can (no Docker installed),
// redis-server, and the run says so. An engine that is installed but fails is an error.

declare module "vitest" {
  interface ProvidedContext {
    redisUrl: string;
  }
}

async function redisContainer(project: TestProject) {
  const { GenericContainer, Wait } = await import("testcontainers");
  const container = await new GenericContainer("redis:7")
    .withCommand(["redis-server", "--appendonly", "yes", "--maxmemory-policy", "noeviction"])
    .withExposedPorts(6379)
    .withLabels({ "org.headroom.test": "integration-redis" })
    .withWaitStrategy(Wait.forLogMessage("Ready to accept connections"))
    .start();
  // testcontainers says "localhost" for a local socket; the published port listens on IPv4.
  const host = container.getHost() === "localhost" ? "127.0.0.1" : container.getHost();
  const url = `redis://${host}:${container.getMappedPort(6379)}`;
  console.log(
    `integration Redis: testcontainers redis:7 (container ${container.getId().slice(0, 12)}) at ${url}`,
  );
  project.provide("redisUrl", url);
  return async () => {
    await container.stop({ remove: true, removeVolumes: true });
  };
}

export default async function setup(project: TestProject) {
  // The processes the tests start (edge, workers, the embedded ClickHouse server, the CLI) run
  // compiled, as `npm start` and the image run them: dist/ is brought up to date once, here.
  ensureBuilt();
  if (process.env.REDIS_URL) {
    project.provide("redisUrl", process.env.REDIS_URL);
    return;
  }
  const mode = process.env.HEADROOM_TEST_DOCKER;
  if (mode !== "0") {
    let engine = false;
    try {
      await acquireEngine(["redis"]);
      engine = true;
    } catch (err) {
      if (mode === "1" || !(err instanceof NoEngineError)) throw err;
      console.log(
        `integration Redis: no Docker engine (${err.message.split("\n")[0]}); using redis-server`,
      );
    }
    if (engine) {
      try {
        const stop = await redisContainer(project);
        return async () => {
          try {
            await stop();
          } finally {
            await releaseEngine();
          }
        };
      } catch (err) {
        await releaseEngine();
        throw err;
      }
    }
  }
  const dir = mkdtempSync(join(tmpdir(), "headroom-test-redis-"));
  const server: RedisServer = await startRedisServer({ dir });
  console.log(`integration Redis: redis-server at ${server.url}`);
  project.provide("redisUrl", server.url);
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
