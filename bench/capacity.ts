import type { EndToEndPhase } from "./phase-e2e.js";
import { MACHINE } from "./proc-stats.js";

// What an operator sizes a deployment with: CPU per report for each component, from the
// saturated end-to-end phase (each process's CPU from the start of the load until ClickHouse held
// every accepted report, over those reports), and the cores of each that 100,000 reports/s need.

export interface CapacityRow {
  component: string;
  /** Processes of this component in the run. */
  processes: number;
  cpuSeconds: number;
  usPerReport: number;
  /** Cores needed per 100,000 reports/s: µs per report × 100,000 / 1,000,000. */
  coresPer100k: number;
}

export interface Capacity {
  /** Reports the phase carried all the way (what the edges enqueued). */
  reports: number;
  /** edge, Redis, Redis replicas, worker, ClickHouse server: the pipeline's parts. */
  components: CapacityRow[];
  /** Their sum. */
  pipeline: CapacityRow;
  /** The load generator, per request it sent (not part of a deployment). */
  generator: CapacityRow & { name: string; requests: number };
}

/** The component a benchmark process belongs to, by its name; null for the machine. */
export function componentOf(processName: string): string | null {
  if (processName === MACHINE) return null;
  if (/^edge( \d+)?$/.test(processName)) return "edge";
  if (/^worker \d+$/.test(processName)) return "worker";
  if (processName === "redis") return "Redis";
  if (/^redis replica \d+$/.test(processName)) return "Redis replicas";
  if (processName === "clickhouse") return "ClickHouse server";
  return processName;
}

const ORDER = ["edge", "Redis", "Redis replicas", "worker", "ClickHouse server"];

function row(component: string, processes: number, cpuSeconds: number, units: number) {
  const usPerReport = units > 0 ? Math.round((cpuSeconds * 1e7) / units) / 10 : 0;
  return {
    component,
    processes,
    cpuSeconds: Math.round(cpuSeconds * 100) / 100,
    usPerReport,
    coresPer100k: Math.round(usPerReport * 10) / 100,
  };
}

/** What a capacity table is made of: any phase whose reports were carried until stored. */
export type CarriedPhase = Pick<EndToEndPhase, "cpuSecondsToStored" | "enqueued" | "load">;

export function capacityOf(p: CarriedPhase): Capacity {
  const seconds = new Map<string, { cpu: number; processes: number }>();
  for (const [name, cpu] of Object.entries(p.cpuSecondsToStored)) {
    const c = componentOf(name);
    if (c === null) continue;
    const s = seconds.get(c) ?? { cpu: 0, processes: 0 };
    seconds.set(c, { cpu: s.cpu + cpu, processes: s.processes + 1 });
  }
  const rank = (c: string) => (ORDER.includes(c) ? ORDER.indexOf(c) : ORDER.length);
  const components = [...seconds.entries()]
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([c, s]) => row(c, s.processes, s.cpu, p.enqueued));
  const total = [...seconds.values()].reduce((a, s) => a + s.cpu, 0);
  const processes = components.reduce((a, c) => a + c.processes, 0);
  return {
    reports: p.enqueued,
    components,
    pipeline: row("pipeline", processes, total, p.enqueued),
    generator: {
      ...row("load generator", p.load.generators, p.load.generatorCpuS, p.load.sent),
      name: p.load.generator,
      requests: p.load.sent,
    },
  };
}
