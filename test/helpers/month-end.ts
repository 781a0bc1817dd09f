import { setTimeout as sleep } from "node:timers/promises";

// The quota is per calendar month (UTC): a test that began in the last seconds of a month would
// see it reset half way. Those seconds are waited out, by the clock the quota counts by (pass the
// edge's Redis time where the test reads it) — a bounded wait for a clock, not for a condition.

export async function notAtMonthEnd(
  now: () => number | Promise<number> = Date.now,
  marginMs = 60_000,
): Promise<void> {
  const t = await now();
  const d = new Date(t);
  const left = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - t;
  if (left < marginMs) await sleep(left + 100);
}
