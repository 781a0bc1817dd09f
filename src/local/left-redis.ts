import { existsSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { alive, commandLine } from "./running-stack.js";

// A redis-server left running on a data directory by a stack that was killed without a word
// (SIGKILL: nothing stops a process of its own group). Two servers must never share an AOF, so
// the next start on the directory stops it first: SIGTERM, on which Redis writes its AOF out and
// exits, as at any clean stop.

export const redisPidPath = (dir: string) => join(resolve(dir), "redis-server.pid");

/** The PID of a redis-server running on `dir` (its pidfile's, checked against /proc), or null. */
export function redisLeftOn(dir: string): number | null {
  const file = redisPidPath(dir);
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, "utf8").trim());
  if (!Number.isSafeInteger(pid) || pid <= 0 || !alive(pid)) return null;
  // A PID reused by another program, or a redis-server on another directory, is not ours.
  const args = commandLine(pid);
  if (args === null || !/^redis-server\b/.test(args[0] ?? "")) return null;
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === resolve(dir) ? pid : null;
  } catch {
    return null;
  }
}

/** Alive and not a zombie (one that exited, waiting for a parent that may never reap it). */
function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

export class RedisLeftRunningError extends Error {
  override name = "RedisLeftRunningError";
}

/**
 * Stops the redis-server left running on `dir`, if any, and waits until it has exited;
 * `onFound` is told its PID first. Throws when it outlives `timeoutMs`.
 */
export async function stopRedisLeftOn(
  dir: string,
  onFound: (pid: number) => void,
  timeoutMs = 30_000,
): Promise<void> {
  const pid = redisLeftOn(dir);
  if (pid === null) {
    // A pidfile naming no redis-server of this directory is stale (a crash, a reboot).
    rmSync(redisPidPath(dir), { force: true });
    return;
  }
  onFound(pid);
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + timeoutMs;
  while (running(pid)) {
    if (Date.now() > deadline)
      throw new RedisLeftRunningError(
        `a redis-server (PID ${pid}) left running on ${dir} by a stack that did not stop did not exit within ${timeoutMs / 1000} s of SIGTERM; stop it (kill ${pid}) and start again`,
      );
    await sleep(100);
  }
}
