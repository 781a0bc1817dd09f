import {
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";

// Which Headroom holds what: the stack that runs on a data directory (its PID in stack.pid,
// written by `npm start` and removed when it stops), and the process that listens on a port
// (Linux's /proc), so that a second `npm start` says "Headroom is running, PID n" instead of
// "another program".

export const stackPidPath = (dataDir: string) => join(dataDir, "stack.pid");

/** A process's arguments, or null when it is gone or not ours to read (or not on Linux). */
export function commandLine(pid: number): string[] | null {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    return raw === "" ? null : raw.split("\0").filter((a) => a !== "");
  } catch {
    return null;
  }
}

/** Headroom's entry points (src/main/, workers/), compiled or not; a package's own are not. */
const HEADROOM_ENTRY =
  /^(?!.*\/node_modules\/)(?:.*\/)?(src\/main\/(?:stack|edge|api|cli|clickhouse-serve|worker-process)|workers\/(?:ingest|alerts))\.[jt]s$/;

/** The Headroom entry a process runs (`src/main/edge`, `workers/ingest`), or null. */
export function headroomEntry(args: string[]): string | null {
  for (const a of args) {
    const m = HEADROOM_ENTRY.exec(a);
    if (m) return m[1] as string;
  }
  return null;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The PID of the stack running on `dataDir`, or null. A PID file left by a stack that did not
 * stop cleanly (SIGKILL, a crash) names a process that is gone, or one that is not a stack.
 */
export function runningStack(dataDir: string): number | null {
  const file = stackPidPath(dataDir);
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, "utf8").trim());
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || !alive(pid)) return null;
  const args = commandLine(pid);
  // Where /proc cannot say, a live PID is taken at its word.
  return args === null || headroomEntry(args) === "src/main/stack" ? pid : null;
}

/** Writes this process's PID as the stack of `dataDir`; the returned function removes it. */
export function claimDataDir(dataDir: string): () => void {
  const file = stackPidPath(dataDir);
  writeFileSync(file, `${process.pid}\n`, { mode: 0o644 });
  return () => {
    try {
      if (readFileSync(file, "utf8").trim() === String(process.pid)) rmSync(file, { force: true });
    } catch {
      // Already gone.
    }
  };
}

export interface PortHolder {
  pid: number;
  /** The Headroom entry it runs (`src/main/edge`), or null for any other program. */
  headroom: string | null;
  /** For a Headroom child of a stack, the stack's PID. */
  stackPid: number | null;
}

/** Socket inodes listening on `port` (TCP, v4 and v6), from /proc/net. */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const row of text.split("\n").slice(1)) {
      const cols = row.trim().split(/\s+/);
      const local = cols[1];
      // st 0A is LISTEN; the local address ends with the port in hex.
      if (!local || cols[3] !== "0A") continue;
      if (Number.parseInt(local.split(":").pop() ?? "", 16) === port && cols[9]) {
        inodes.add(cols[9]);
      }
    }
  }
  return inodes;
}

/**
 * The process that listens on `port`, if this user may see it (Linux only; null elsewhere, or
 * when the port's holder belongs to another user).
 */
export function portHolder(port: number): PortHolder | null {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return null;
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((e) => /^\d+$/.test(e));
  } catch {
    return null;
  }
  for (const p of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${p}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${p}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode === undefined || !inodes.has(inode)) continue;
      const pid = Number(p);
      const headroom = headroomEntry(commandLine(pid) ?? []);
      return { pid, headroom, stackPid: headroom === null ? null : parentStack(pid) };
    }
  }
  return null;
}

function parentStack(pid: number): number | null {
  if (headroomEntry(commandLine(pid) ?? []) === "src/main/stack") return pid;
  try {
    // stat: "pid (comm) state ppid …"; comm may hold spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    return headroomEntry(commandLine(ppid) ?? []) === "src/main/stack" ? ppid : null;
  } catch {
    return null;
  }
}
