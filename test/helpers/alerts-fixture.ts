import { v7 as uuidv7 } from "uuid";
import { createEvalQueue, createWebhookQueue } from "../../src/alerts/queues.js";
import { createRuleStore } from "../../src/alerts/rule-store.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { type ReportRow, toRecord, toRow } from "../../src/report/report-schema.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";
import { eventually } from "./eventually.js";
import type { Pipeline } from "./pipeline.js";

// What the alerts tests share on top of a pipeline: the rule store, the alerts queues, reports at
// a chosen usage, and waiting until a report went all the way through (stored, evaluated, its
// webhooks sent or given up on).

/** A report whose requests are `usedPct` % used (of 1000), as the edge would have made it. */
export function usageRow(
  project: string,
  usedPct: number,
  opts: { provider?: string; app?: string; at?: number } = {},
): ReportRow {
  const at = opts.at ?? Date.now();
  return toRow(
    toRecord(
      {
        provider: opts.provider ?? "openai",
        app: opts.app ?? "chat",
        model: "gpt-4o",
        timestamp: at,
        limits: {
          requests_limit: 1000,
          requests_remaining: Math.round(1000 - usedPct * 10),
          tokens_limit: 2_000_000,
          tokens_remaining: 1_000_000,
          reset_requests_ms: 60_000,
          reset_tokens_ms: 30_000,
        },
        credits: null,
      },
      { reportId: uuidv7(), projectId: project, keyId: "key_test", receivedAt: at },
    ),
  );
}

export type AlertsFixture = ReturnType<typeof alertsFixture>;

export function alertsFixture(p: Pipeline) {
  const prefix = p.config.QUEUE_PREFIX;
  const rules = createRuleStore(p.redis, prefix);
  const evalQueue = createEvalQueue(p.redis, prefix);
  const webhooks = createWebhookQueue(p.redis, prefix, {
    attempts: 1,
    backoffMs: 1,
    keepDeadDays: 14,
  });
  const pending = async (q: { getJobCounts: typeof evalQueue.getJobCounts }) => {
    const c = await q.getJobCounts("wait", "active", "delayed", "prioritized", "waiting-children");
    return Object.values(c).reduce((a, b) => a + b, 0);
  };

  return {
    rules,
    evalQueue,
    webhooks,
    /** Nothing left to do: reports stored, batches evaluated, webhooks sent or dead. */
    async settled(timeoutMs = 30_000) {
      await eventually(
        async () => {
          if ((await pending(p.queue)) + (await pending(evalQueue)) + (await pending(webhooks))) {
            throw new Error("work pending");
          }
        },
        { timeoutMs, intervalMs: 50 },
      );
    },
    /** One report per job, each one through the whole pipeline before the next. */
    async send(project: string, usages: number[], opts: { provider?: string } = {}) {
      for (const pct of usages) {
        await p.queue.add(REPORT_JOB, {
          v: ROW_SHAPES.current,
          rows: [usageRow(project, pct, opts)],
        });
        await this.settled();
      }
    },
    async close() {
      await evalQueue.obliterate({ force: true }).catch(() => {});
      await webhooks.obliterate({ force: true }).catch(() => {});
      await evalQueue.close();
      await webhooks.close();
    },
  };
}
