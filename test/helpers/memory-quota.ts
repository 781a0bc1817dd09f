import type { QuotaCall, QuotaReply, QuotaStore } from "../../src/edge/quota-counter.js";

// The quota script (quota-counter.ts) as a model in memory, with the clock the test moves: the
// same QuotaStore contract, each call applied at once and answered one round trip later. The
// cases in quota-store-cases.ts hold it and the Lua to the same answers, so the unit tests of
// the allowance that run against it run against what Redis does.

const RTT_MS = 1;

export function memoryQuota(defaultKey: string) {
  const counters = new Map<string, number>();
  const holders = new Map<string, Map<string, { units: number; at: number }>>();
  const calls: { edge: string; call: QuotaCall }[] = [];

  function apply(key: string, edge: string, c: QuotaCall): QuotaReply {
    const now = Date.now();
    const held = holders.get(key) ?? new Map<string, { units: number; at: number }>();
    holders.set(key, held);
    let used = counters.get(key);
    if (used === undefined) {
      if (c.want === 0) {
        held.delete(edge);
        return { granted: 0, used: 0, othersHeld: 0, msToReturn: 0 };
      }
      used = 0;
    }
    used -= Math.min(c.giveBack, Math.max(used, 0));
    const left = Math.max(0, c.monthly - used);
    const granted = Math.min(c.want, left, Math.max(c.serve, Math.floor(left / c.spread)));
    used += granted;
    counters.set(key, used);
    const units = c.keep + Math.max(0, granted - c.serve);
    if (units > 0) held.set(edge, { units, at: now });
    else held.delete(edge);
    let othersHeld = 0;
    let soonest = -1;
    if (granted < c.want) {
      for (const [other, h] of held) {
        if (other === edge || now - h.at >= c.leaseMs + c.graceMs) continue;
        othersHeld += h.units;
        const w = Math.max(0, h.at + c.leaseMs - now);
        if (soonest < 0 || w < soonest) soonest = w;
      }
    }
    return { granted, used, othersHeld, msToReturn: Math.max(soonest, 0) };
  }

  const store: QuotaStore = (key, edge, c) => {
    calls.push({ edge, call: c });
    const reply = apply(key, edge, c);
    return new Promise((resolve) => setTimeout(() => resolve(reply), RTT_MS));
  };
  return {
    store,
    calls,
    used: (key = defaultKey) => counters.get(key) ?? 0,
    held: (key = defaultKey) =>
      [...(holders.get(key)?.values() ?? [])].reduce((n, h) => n + h.units, 0),
    /** An edge that reserved `units` and then died: nothing of it ever comes back. */
    dieHolding(edge: string, units: number, monthly: number) {
      return apply(defaultKey, edge, {
        monthly,
        want: units,
        serve: 0,
        giveBack: 0,
        keep: 0,
        spread: 1,
        leaseMs: 1_000,
        graceMs: 2_000,
      });
    },
  };
}
