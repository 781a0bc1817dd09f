import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, inject, it } from "vitest";
import { monthOf } from "../../src/edge/limits.js";
import { redisQuotaStore } from "../../src/edge/quota-counter.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { notAtMonthEnd } from "../helpers/month-end.js";
import { QUOTA_STORE_CASES, runQuotaStoreCase } from "../helpers/quota-store-cases.js";
import { redisNow } from "../helpers/redis-clock.js";

// The quota's Lua script on a real Redis answers the shared table of cases as its model in
// memory does (unit: quota-store-model.test.ts), which the allowance's unit tests run against.

let redis: Redis;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});

afterAll(() => {
  redis?.disconnect();
});

describe("the quota store's Lua script", () => {
  for (const c of QUOTA_STORE_CASES) {
    it(c.name, async () => {
      // The script counts only the month Redis's clock is in.
      await notAtMonthEnd(() => redisNow(redis));
      const store = redisQuotaStore(redis, `t-quota-${uniqueId()}`);
      const key = `p:${monthOf(await redisNow(redis))}`;
      // A lease of a minute less the time between the calls, on a loaded machine.
      await runQuotaStoreCase(store, key, c, 10_000);
    });
  }
});
