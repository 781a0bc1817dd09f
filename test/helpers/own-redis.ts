import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startRedisServer } from "../../src/local/redis-server.js";
import { freePort } from "./free-ports.js";

// A redis-server of one test file's own. A file that reads all of Redis ("found nowhere") reads
// only its own keys here: the shared test Redis holds every earlier file's leftovers, and a CI
// run once timed out a test (60 s) reading them key by key late in a shuffled run.

export interface OwnRedis {
  url: string;
  stop(): Promise<void>;
}

export async function startOwnRedis(): Promise<OwnRedis> {
  const dir = mkdtempSync(join(tmpdir(), "headroom-own-redis-"));
  try {
    const server = await startRedisServer({ dir, port: await freePort(), appendonly: false });
    return {
      url: server.url,
      async stop() {
        await server.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
