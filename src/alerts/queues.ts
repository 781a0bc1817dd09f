import { type ConnectionOptions, Queue } from "bullmq";
import type { ReportRow } from "../report/report-schema.js";
import type { AlertRule } from "./rule.js";

// The alerts' own queues, beside the reports queue (same prefix, so the same hash tag):
// - `alerts`: one job per stored batch that has rows some rule watches (job id from the batch's
//   manifest token: a redelivered batch adds nothing while its job is still there);
// - `alerts-webhooks`: one job per event (job id = event id), retried with backoff; its failed
//   set is the alerts' dead-letter set, replayable with `headroom alerts replay`.

export const EVAL_QUEUE = "alerts";
export const WEBHOOK_QUEUE = "alerts-webhooks";
export const EVAL_JOB = "evaluate";
export const WEBHOOK_JOB = "webhook";

export interface EvalJobData {
  v: 1;
  /** The manifest's token: the batch's identity. */
  token: string;
  /** The rules as they were when the batch was stored (no secrets). */
  rules: AlertRule[];
  /** The batch's rows some rule watches, positional as in the reports queue. */
  rows: ReportRow[];
}

export interface WebhookJobData {
  v: 1;
  event_id: string;
  rule_id: string;
  /** The rule's project, for fair delivery (absent in jobs queued by older versions). */
  project?: string;
  url: string;
  /** The exact body: signed per attempt, never re-serialised. */
  body: string;
}

export const evalJobId = (token: string) => `eval-${token}`;

export type EvalQueue = Queue<EvalJobData, void, string>;

export function createEvalQueue(connection: ConnectionOptions, prefix: string): EvalQueue {
  return new Queue<EvalJobData, void, string>(EVAL_QUEUE, {
    connection,
    prefix,
    defaultJobOptions: {
      removeOnComplete: true,
      removeOnFail: false,
      attempts: 10,
      backoff: { type: "exponential", delay: 1_000 },
    },
  });
}

export interface WebhookRetry {
  attempts: number;
  backoffMs: number;
  /** How long a webhook that failed every attempt is kept for `alerts dead` and replay. */
  keepDeadDays: number;
}

export type WebhookQueue = Queue<WebhookJobData, void, string>;

export function createWebhookQueue(
  connection: ConnectionOptions,
  prefix: string,
  retry: WebhookRetry,
): WebhookQueue {
  return new Queue<WebhookJobData, void, string>(WEBHOOK_QUEUE, {
    connection,
    prefix,
    defaultJobOptions: {
      // Kept a day after delivery: an event queued again (a batch evaluated twice) within that
      // time finds its job id taken and is not sent twice.
      removeOnComplete: { age: 86_400 },
      // Dead webhooks are kept as the ingest dead letters are (DLQ_RETENTION_DAYS), not for
      // ever: a receiver gone for good must not grow Redis without end. BullMQ drops the older
      // ones as others fail.
      removeOnFail: { age: retry.keepDeadDays * 86_400 },
      attempts: retry.attempts,
      backoff: { type: "exponential", delay: retry.backoffMs },
    },
  });
}
