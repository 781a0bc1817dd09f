import { expect } from "vitest";
import type { QuotaCall, QuotaReply, QuotaStore } from "../../src/edge/quota-counter.js";

// One table of calls and answers for the quota's store, run against both implementations: the
// Lua script on a real Redis (integration: quota.store-cases.test.ts) and its model in memory
// that the allowance's unit tests use (unit: quota-store-model.test.ts). A bug in the script, or
// the two drifting apart, fails one of them.
//
// Leases are a minute unless a case is about their end, so an answer's msToReturn is the lease
// less the time between the calls: none in the model (its clock stands still), a few ms on Redis.

export interface QuotaStep {
  edge: string;
  call: Partial<QuotaCall>;
  expect: QuotaReply;
}

export interface QuotaStoreCase {
  name: string;
  steps: QuotaStep[];
}

const LEASE_MS = 60_000;

const DEFAULT_CALL: QuotaCall = {
  monthly: 10,
  want: 1,
  serve: 1,
  giveBack: 0,
  keep: 0,
  spread: 1,
  leaseMs: LEASE_MS,
  graceMs: LEASE_MS,
};

const reply = (granted: number, used: number, othersHeld = 0, msToReturn = 0): QuotaReply => ({
  granted,
  used,
  othersHeld,
  msToReturn,
});

export const QUOTA_STORE_CASES: QuotaStoreCase[] = [
  {
    name: "the first reservation of a month creates its counter",
    steps: [
      { edge: "a", call: { want: 3, serve: 3 }, expect: reply(3, 3) },
      { edge: "b", call: { want: 2, serve: 2 }, expect: reply(2, 5) },
    ],
  },
  {
    name: "a call that only gives back, on a month never counted, creates nothing",
    steps: [
      { edge: "a", call: { want: 0, serve: 0, giveBack: 2 }, expect: reply(0, 0) },
      { edge: "a", call: { want: 1, serve: 1 }, expect: reply(1, 1) },
    ],
  },
  {
    name: "never more than the quota: what is left, then nothing",
    steps: [
      { edge: "a", call: { monthly: 5, want: 4, serve: 4 }, expect: reply(4, 4) },
      { edge: "a", call: { monthly: 5, want: 4, serve: 4 }, expect: reply(1, 5) },
      { edge: "a", call: { monthly: 5, want: 1, serve: 1 }, expect: reply(0, 5) },
    ],
  },
  {
    name: "beyond the reports waiting, at most 1/spread of what is left",
    steps: [
      { edge: "a", call: { monthly: 100, want: 50, serve: 2, spread: 4 }, expect: reply(25, 25) },
      { edge: "a", call: { monthly: 100, want: 50, serve: 2, spread: 4 }, expect: reply(18, 43) },
      // The reports waiting are served whatever the spread; a's unused units are named.
      {
        edge: "b",
        call: { monthly: 100, want: 50, serve: 30, spread: 4 },
        expect: reply(30, 73, 16, LEASE_MS),
      },
      { edge: "b", call: { monthly: 100, want: 3, serve: 3, spread: 100 }, expect: reply(3, 76) },
    ],
  },
  {
    name: "units given back come off the counter, never below zero, and can be granted again",
    steps: [
      { edge: "a", call: { want: 4, serve: 4 }, expect: reply(4, 4) },
      { edge: "a", call: { want: 0, serve: 0, giveBack: 3 }, expect: reply(0, 1) },
      { edge: "a", call: { want: 0, serve: 0, giveBack: 5 }, expect: reply(0, 0) },
      { edge: "b", call: { want: 12, serve: 12 }, expect: reply(10, 10) },
    ],
  },
  {
    name: "a shortfall names what other edges hold on lease, and when the first lease ends",
    steps: [
      // a serves one report and holds the other five it was granted.
      { edge: "a", call: { want: 6, serve: 1 }, expect: reply(6, 6) },
      { edge: "b", call: { want: 6, serve: 6 }, expect: reply(4, 10, 5, LEASE_MS) },
      // An edge's own holding is not counted for it; a call holding nothing clears it.
      { edge: "a", call: { want: 1, serve: 1 }, expect: reply(0, 10) },
      { edge: "b", call: { want: 1, serve: 1 }, expect: reply(0, 10) },
    ],
  },
  {
    name: "units an edge keeps count as held, beside those granted beyond its reports",
    steps: [
      { edge: "a", call: { want: 2, serve: 2, keep: 3 }, expect: reply(2, 2) },
      { edge: "b", call: { want: 3, serve: 1 }, expect: reply(3, 5) },
      { edge: "c", call: { want: 9, serve: 9 }, expect: reply(5, 10, 5, LEASE_MS) },
    ],
  },
  {
    name: "holdings past their lease and grace are not waited for",
    steps: [
      { edge: "a", call: { want: 6, serve: 1, leaseMs: 0, graceMs: 0 }, expect: reply(6, 6) },
      { edge: "b", call: { want: 6, serve: 6, leaseMs: 0, graceMs: 0 }, expect: reply(4, 10) },
    ],
  },
];

/**
 * Runs a case's calls in order on `key` (a month of its own, never counted before), each answer
 * as the table says; msToReturn may fall short of it by up to `slackMs` (time between calls).
 */
export async function runQuotaStoreCase(
  store: QuotaStore,
  key: string,
  c: QuotaStoreCase,
  slackMs = 0,
): Promise<void> {
  for (const [i, step] of c.steps.entries()) {
    const got = await store(key, step.edge, { ...DEFAULT_CALL, ...step.call });
    const where = `${c.name}, step ${i + 1} (${step.edge})`;
    expect({ ...got, msToReturn: 0 }, where).toStrictEqual({ ...step.expect, msToReturn: 0 });
    expect(got.msToReturn, where).toBeLessThanOrEqual(step.expect.msToReturn);
    expect(got.msToReturn, where).toBeGreaterThanOrEqual(
      Math.max(0, step.expect.msToReturn - slackMs),
    );
  }
}
