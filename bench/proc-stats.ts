import { readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";

// What Linux tells about a process in /proc: peak resident memory (VmHWM), which can be reset
// between phases so each phase reports its own peak, and CPU time used so far.

const CLOCK_TICKS = 100; // USER_HZ on Linux

function status(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return null;
  }
}

function kib(text: string | null, field: string): number | null {
  const m = text ? new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text) : null;
  return m ? Number(m[1]) * 1024 : null;
}

/** Peak resident set size in bytes since start or since the last `resetPeakRss`. */
export const peakRssBytes = (pid: number): number | null => kib(status(pid), "VmHWM");

export const rssBytes = (pid: number): number | null => kib(status(pid), "VmRSS");

/** Resets VmHWM to the current RSS ("5" in clear_refs); false where the kernel refuses. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** User + system CPU seconds the process has used. */
export function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

export interface Machine {
  cores: number;
  memoryGiB: number;
  cpuModel: string;
  node: string;
  platform: string;
  date: string;
}

export function machine(now = new Date()): Machine {
  const list = cpus();
  return {
    cores: list.length,
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    cpuModel: list[0]?.model.trim() ?? "unknown",
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    date: now.toISOString(),
  };
}

/** CPU seconds used by everything on the machine (all cores, /proc/stat). */
export function machineCpuSeconds(): number {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = line
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** The key under which `cpuMeter` reports the whole machine. */
export const MACHINE = "machine";

/**
 * CPU time of several processes over a phase, as cores used on average and as CPU seconds, plus
 * the whole machine's (`machine`): the difference shows what other processes took from the
 * benchmark.
 */
export function cpuMeter(pids: Record<string, number>) {
  const start = performance.now();
  const sample = (): Record<string, number> => ({
    ...Object.fromEntries(Object.entries(pids).map(([n, p]) => [n, cpuSeconds(p) ?? 0])),
    [MACHINE]: machineCpuSeconds(),
  });
  const before = sample();
  return {
    /** Since the meter started; it can be read more than once. */
    read(): { cores: Record<string, number>; seconds: Record<string, number>; elapsedS: number } {
      const elapsedS = (performance.now() - start) / 1000;
      const after = sample();
      const used = Object.fromEntries(
        Object.keys(after).map((n) => [n, Math.max(0, (after[n] ?? 0) - (before[n] ?? 0))]),
      );
      const round = (v: number) => Math.round(v * 100) / 100;
      return {
        cores: Object.fromEntries(
          Object.entries(used).map(([n, v]) => [n, elapsedS > 0 ? round(v / elapsedS) : 0]),
        ),
        seconds: Object.fromEntries(Object.entries(used).map(([n, v]) => [n, round(v)])),
        elapsedS: Math.round(elapsedS * 1000) / 1000,
      };
    },
  };
}
