import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { exited } from "../../src/local/child-process.js";
import { redisLeftOn, redisPidPath, stopRedisLeftOn } from "../../src/local/left-redis.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";

// The redis-server a killed stack left on its data directory: found by its pidfile, checked
// against /proc (a reused PID, or a redis-server of another directory, is never signalled), and
// stopped with its AOF written out.

const dirs: string[] = [];
const servers: RedisServer[] = [];
const dir = () => {
  const d = mkdtempSync(join(tmpdir(), "left-redis-"));
  dirs.push(d);
  return d;
};
const start = async (d: string) => {
  const s = await startRedisServer({ dir: d });
  servers.push(s);
  return s;
};

afterEach(async () => {
  for (const s of servers.splice(0)) await s.kill();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("a redis-server left running on a data directory", () => {
  it("is found by its pidfile, stopped with SIGTERM, and its data is there for the next one", async () => {
    const d = dir();
    const left = await start(d);
    const client = new Redis(left.url);
    await client.set("kept", "yes");
    client.disconnect();
    expect(redisLeftOn(d)).toBe(left.process.pid);

    const found: number[] = [];
    await stopRedisLeftOn(d, (pid) => found.push(pid));
    expect(found).toEqual([left.process.pid]);
    // Stopped as at a clean shutdown (Redis exits 0 on SIGTERM), its pidfile removed.
    await exited(left.process);
    expect(left.process.exitCode).toBe(0);
    expect(existsSync(redisPidPath(d))).toBe(false);
    expect(redisLeftOn(d)).toBeNull();

    const next = await start(d);
    const again = new Redis(next.url);
    expect(await again.get("kept")).toBe("yes");
    again.disconnect();
  });

  it("is found through a symlink to its directory (the pidfile's path is the link's, /proc's the real one)", async () => {
    const real = dir();
    const link = `${real}-link`;
    symlinkSync(real, link);
    dirs.push(link);
    const left = await start(link);
    expect(redisLeftOn(link)).toBe(left.process.pid);
    expect(redisLeftOn(real)).toBe(left.process.pid);
  });

  it("never signals a process the pidfile names that is not a redis-server of this directory", async () => {
    const d = dir();
    const other = await start(dir());
    // This test's own PID, and a redis-server running on another directory.
    for (const pid of [process.pid, other.process.pid as number]) {
      writeFileSync(redisPidPath(d), `${pid}\n`);
      expect(redisLeftOn(d)).toBeNull();
      const found: number[] = [];
      await stopRedisLeftOn(d, (p) => found.push(p));
      expect(found).toEqual([]);
    }
    expect(other.process.exitCode).toBeNull();
    expect(other.process.signalCode).toBeNull();
    // A stale pidfile is removed; a missing one is no leftover.
    expect(redisLeftOn(d)).toBeNull();
    await stopRedisLeftOn(d, () => {
      throw new Error("no leftover to find");
    });
  });
});
