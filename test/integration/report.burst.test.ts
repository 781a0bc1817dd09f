import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createBurstAllowance } from "../../src/limits/burst-allowance.js";
import { redisTokenBucket } from "../../src/limits/token-bucket.js";
import { clientReport, type EdgeFixture, startEdge, uniqueId } from "../helpers/edge-fixture.js";

// The burst limit on a real Redis when many reports of one project arrive at the same instant:
// every report the bucket has a token for passes, on one edge and on two sharing the bucket, at
// several rates and sizes. The bucket only refills while the test runs, so the bound is a floor.

let fx: EdgeFixture;
let redis: Redis[];

beforeAll(async () => {
  fx = await startEdge();
  redis = [new Redis(inject("redisUrl")), new Redis(inject("redisUrl"))];
});

afterAll(async () => {
  await fx?.close();
  for (const r of redis ?? []) r.disconnect();
});

describe("burst limit, reports arriving together", () => {
  it("125 reports at once on a bucket of 125 (25 a second) all pass over HTTP", async () => {
    const k = await fx.createKey({
      plan: "pro",
      overrides: { monthly: null, burst: 25, capacity: 125 },
    });
    const answers = await Promise.all(
      Array.from({ length: 125 }, () => fx.post(clientReport(), { key: k.key })),
    );
    expect(answers.filter((a) => a.statusCode !== 200).map((a) => a.body)).toEqual([]);
  });

  const cases = [
    { rate: 1, capacity: 5 },
    { rate: 10, capacity: 50 },
    { rate: 25, capacity: 125 },
    { rate: 39, capacity: 39 },
    { rate: 200, capacity: 1_000 },
    { rate: 2_000, capacity: 3_000 },
  ];
  for (const edges of [1, 2]) {
    for (const { rate, capacity } of cases) {
      it(`rate ${rate}, capacity ${capacity}, ${edges} edge(s): the bucket's size passes`, async () => {
        const prefix = `t-burst-${uniqueId()}`;
        const allowances = Array.from({ length: edges }, (_, i) =>
          createBurstAllowance({
            take: redisTokenBucket(redis[i] as Redis, prefix),
            share: 0.05,
          }),
        );
        const n = capacity * 2;
        const outcomes = await Promise.all(
          Array.from({ length: n }, (_, i) => allowances[i % edges]?.take("p", { rate, capacity })),
        );
        const passed = outcomes.filter((o) => o === null).length;
        // What another edge took and holds unused is the most a report can miss.
        const otherChunk = edges > 1 ? Math.floor(rate * 0.05) : 0;
        expect(passed).toBeGreaterThanOrEqual(capacity - otherChunk);
        for (const o of outcomes) if (o) expect(o.msToNext).toBeGreaterThan(0);
      });
    }
  }
});
