import type { Proc } from "./processes.js";

/** A counter of a worker process, read from its /metrics (its port is in its "worker ready" line). */
export async function workerMetric(w: Proc, name: string): Promise<number> {
  const port = /"metricsPort":(\d+)/.exec(w.output())?.[1];
  if (!port) throw new Error("the worker has not said which port its metrics are on yet");
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
}
