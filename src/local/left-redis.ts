import { existsSync, readFileSync, readlinkSync, realpathSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { alive, commandLine } from "./running-stack.js";

// A redis-server left running on a data directory by a stack that was killed without a word
// (SIGKILL: nothing stops a process of its own group). Two servers must never share an AOF, so
// the next start on the directory stops it first: SIGTERM, on which Redis writes its AOF out and
// exits, as at any clean stop.

export const redisPidPath = (dir: string) => join(resolve(dir), "redis-server.pid");

export class RedisLeftRunningError extends Error {
  override name = "RedisLeftRunningError";
}

/** Alive and not a zombie (one that exited, waiting for a parent that may never reap it). */
function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.[0] !== "Z";
  } catch {
    // No /proc: alive is all that can be said.
    return true;
  }
}

/** Whether `pid` is a redis-server running in `dir`; null when this system cannot say. */
function isRedisOn(pid: number, dir: string): boolean | null {
  const args = commandLine(pid);
  if (args === null) return null;
  if (!/^redis-server\b/.test(args[0] ?? "")) return false;
  try {
    // Redis runs in its --dir; /proc gives the real path, so compare real paths (a symlink).
    return realpathSync(readlinkSync(`/proc/${pid}/cwd`)) === realpathSync(dir);
  } catch {
    return null;
  }
}

/**
 * The PID of a redis-server running on `dir` (its pidfile's, checked against /proc), or null
 * when there is none. Throws when the pidfile names a live process this system cannot check
 * (no /proc): the directory may be in use, and nothing is signalled on a guess.
 */
export function redisLeftOn(dir: string): number | null {
  const file = redisPidPath(dir);
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, "utf8").trim());
  if (!Number.isSafeInteger(pid) || pid <= 0 || !running(pid)) return null;
  const ours = isRedisOn(pid, dir);
  // Gone between the two looks: nothing left running.
  if (ours === null && !running(pid)) return null;
  if (ours === null)
    throw new RedisLeftRunningError(
      `${file} names a running process (PID ${pid}) this system cannot check: if it is a redis-server on ${dir}, stop it (kill ${pid}); if not, remove ${file}; then start again`,
    );
  return ours ? pid : null;
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
  try {
    process.kill(pid, "SIGTERM");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
  const deadline = Date.now() + timeoutMs;
  // Until it is gone, or its PID is another process's.
  while (running(pid) && isRedisOn(pid, dir) !== false) {
    if (Date.now() > deadline)
      throw new RedisLeftRunningError(
        `a redis-server (PID ${pid}) left running on ${dir} by a stack that did not stop did not exit within ${timeoutMs / 1000} s of SIGTERM; stop it (kill ${pid}) and start again`,
      );
    await sleep(100);
  }
}
