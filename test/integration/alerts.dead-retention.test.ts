import { randomBytes } from "node:crypto";
import { Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, expect, inject, it } from "vitest";
import { createWebhookQueue, WEBHOOK_JOB, WEBHOOK_QUEUE } from "../../src/alerts/queues.js";
import { eventually } from "../helpers/eventually.js";

// Dead webhooks (every attempt failed) are kept DLQ_RETENTION_DAYS for `alerts dead` and replay,
// then dropped as later ones fail: a receiver gone for good does not grow Redis without end.
// Here the retention is one second, on the test's own Redis and prefix.

const prefix = `{dead-${randomBytes(4).toString("hex")}}`;
const redis = new Redis(inject("redisUrl"), { maxRetriesPerRequest: null });
const queue = createWebhookQueue(redis, prefix, {
  attempts: 1,
  backoffMs: 1,
  keepDeadDays: 1 / 86_400,
});
const receiverGone = new Worker(
  WEBHOOK_QUEUE,
  async () => {
    throw new Error("connect ECONNREFUSED");
  },
  { connection: redis.duplicate(), prefix },
);

afterAll(async () => {
  await receiverGone.close();
  await queue.obliterate({ force: true });
  await queue.close();
  redis.disconnect();
});

const dead = async () => (await queue.getFailed()).map((j) => j.id);

const addWebhook = (id: string) =>
  queue.add(
    WEBHOOK_JOB,
    { v: 1, event_id: id, rule_id: "rule_1", url: "http://127.0.0.1:1/", body: "{}" },
    { jobId: id },
  );

it("a dead webhook older than the retention is dropped when another one dies", async () => {
  await addWebhook("evt_first");
  await eventually(async () => expect(await dead()).toEqual(["evt_first"]));
  // Later deaths, until one comes after the first's second is over.
  let n = 0;
  await eventually(
    async () => {
      n += 1;
      await addWebhook(`evt_later_${n}`);
      await eventually(async () => expect(await dead()).toContain(`evt_later_${n}`));
      expect(await dead()).not.toContain("evt_first");
    },
    { timeoutMs: 20_000, intervalMs: 300 },
  );
});
