import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {} from "vitest";
import type { TestProject } from "vitest/node";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";

// A real Redis for the integration tests, in order of preference: REDIS_URL from the
// environment; a testcontainers container when a Docker engine answers; a redis-server process
// on a free port in a temp dir. The machine's own Redis on 6379 is never assumed.

declare module "vitest" {
  interface ProvidedContext {
    redisUrl: string;
  }
}

async function dockerAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import("testcontainers");
    const client = await Promise.race([
      getContainerRuntimeClient(),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("timeout")), 3_000)),
    ]);
    return Boolean(client);
  } catch {
    return false;
  }
}

export default async function setup(project: TestProject) {
  if (process.env.REDIS_URL) {
    project.provide("redisUrl", process.env.REDIS_URL);
    return;
  }
  if (process.env.HEADROOM_TEST_DOCKER !== "0" && (await dockerAnswers())) {
    const { GenericContainer, Wait } = await import("testcontainers");
    const container = await new GenericContainer("redis:7")
      .withCommand(["redis-server", "--appendonly", "yes", "--maxmemory-policy", "noeviction"])
      .withExposedPorts(6379)
      .withWaitStrategy(Wait.forLogMessage("Ready to accept connections"))
      .start();
    project.provide("redisUrl", `redis://${container.getHost()}:${container.getMappedPort(6379)}`);
    return async () => {
      await container.stop();
    };
  }
  const dir = mkdtempSync(join(tmpdir(), "headroom-test-redis-"));
  const server: RedisServer = await startRedisServer({ dir });
  project.provide("redisUrl", server.url);
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
