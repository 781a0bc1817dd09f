import { afterEach, beforeEach, describe, it, vi } from "vitest";
import { memoryQuota } from "../helpers/memory-quota.js";
import { QUOTA_STORE_CASES, runQuotaStoreCase } from "../helpers/quota-store-cases.js";

// The quota script's model in memory, which the allowance's unit tests run against, answers the
// shared table of cases as the Lua on a real Redis does (integration: quota.store-cases.test.ts).

beforeEach(() => {
  vi.useFakeTimers({ now: Date.UTC(2024, 4, 10, 12) });
});

afterEach(() => {
  vi.useRealTimers();
});

describe("the quota store's model", () => {
  for (const c of QUOTA_STORE_CASES) {
    it(c.name, async () => {
      const key = "prj:2024-05";
      const { store } = memoryQuota(key);
      // Each answer comes one round trip (1 ms) later, on the clock the test moves: a lease
      // is a few ms shorter by the later calls.
      const timed: typeof store = (k, edge, call) => {
        const answer = store(k, edge, call);
        void vi.advanceTimersByTimeAsync(1);
        return answer;
      };
      await runQuotaStoreCase(timed, key, c, c.steps.length);
    });
  }
});
