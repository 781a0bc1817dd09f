import type { ClickHouseClient } from "@clickhouse/client";
import { DelayedError, type Job, UnrecoverableError, type Worker } from "bullmq";
import type { Logger } from "pino";
import { classifyInsertError, describeError } from "../clickhouse/classify-error.js";
import type { Config } from "../config.js";
import { retryUntilDone, shutdownSignal } from "../lib/retry.js";
import type { DeclarationsReader, ProjectDeclarations } from "../providers/declared-limit.js";
import { createWorkerRuntime } from "../queue/worker-runtime.js";
import type { RedisClient } from "../redis/connections.js";
import { webhookPayload } from "./alert-event.js";
import { createDeliveryLanes, receiverOf } from "./delivery-lanes.js";
import { createDestinationPolicy } from "./destination-policy.js";
import { evaluateBatch, type RefusedSeries, type SeriesFailure } from "./evaluate-batch.js";
import { createEventSink } from "./event-sink.js";
import { createGuardedFetch } from "./guarded-fetch.js";
import { type AlertsMetrics, createAlertsMetrics } from "./metrics.js";
import {
  createEvalQueue,
  createWebhookQueue,
  EVAL_QUEUE,
  type EvalJobData,
  WEBHOOK_JOB,
  WEBHOOK_QUEUE,
  type WebhookJobData,
  type WebhookQueue,
} from "./queues.js";
import { createReceiverBreakers } from "./receiver-breaker.js";
import type { DeriveWindows } from "./row-windows.js";
import { createRuleStore } from "./rule-store.js";
import { createStateStore } from "./state-store.js";
import { createWebhookResolver, webhookDnsOf } from "./webhook-dns.js";
import { sendWebhook } from "./webhook-sender.js";

// The alerts worker: evaluates stored batches (queue `alerts`) and delivers webhooks (queue
// `alerts-webhooks`). Scaled on its own; any number of them may run.
//
// A batch's job: evaluate (events produced atomically with the new states, into the batch's
// outbox), store the events in ClickHouse, queue one webhook job per event (job id = event id),
// then clear the outbox. A crash anywhere in between redelivers the job, which takes the same
// events from the outbox: same rows, same token, same job ids, so nothing is stored or sent twice.

export interface AlertsWorkerDeps {
  config: Pick<
    Config,
    | "QUEUE_PREFIX"
    | "CLICKHOUSE_DATABASE"
    | "CLICKHOUSE_CLUSTER"
    | "RETRY_MAX_DELAY_MS"
    | "ALERTS_CONCURRENCY"
    | "ALERTS_WEBHOOK_CONCURRENCY"
    | "ALERTS_WEBHOOK_ATTEMPTS"
    | "ALERTS_WEBHOOK_BACKOFF_MS"
    | "DLQ_RETENTION_DAYS"
    | "ALERTS_WEBHOOK_TIMEOUT_MS"
    | "ALERTS_WEBHOOK_PER_PROJECT"
    | "ALERTS_WEBHOOK_PER_RECEIVER"
    | "ALERTS_WEBHOOK_BREAKER_FAILURES"
    | "ALERTS_WEBHOOK_BREAKER_COOLOFF_MS"
    | "ALERTS_WEBHOOK_ALLOW"
    | "ALERTS_WEBHOOK_DNS_SERVERS"
    | "ALERTS_WEBHOOK_DNS_TIMEOUT_MS"
    | "ALERTS_WEBHOOK_DNS_MAX_CONCURRENT"
    | "WORKER_LOCK_DURATION_MS"
    | "WORKER_STALLED_INTERVAL_MS"
    | "ALERTS_MAX_SERIES_PER_RULE"
    | "ALERTS_MAX_SERIES_PER_PROJECT"
  >;
  /** A worker-role connection (maxRetriesPerRequest: null). */
  redis: RedisClient;
  clickhouse: ClickHouseClient;
  logger: Logger;
  metrics?: AlertsMetrics;
  /** How a row's windows are derived: src/providers' unless a test's. */
  deriveWindows?: DeriveWindows;
  /**
   * Projects' declared limits (docs/providers.md), as /headroom reads them: workers/alerts.ts
   * gives control/declarations-cache.ts's reader on this Redis (a layer above this one).
   * Absent: none are declared.
   */
  declarations?: DeclarationsReader;
}

/** A rule's refused series are logged at most this often. */
const REFUSAL_LOG_INTERVAL_MS = 60_000;

/** A delivery over its lanes' caps waits about this long (spread, so they do not return at once). */
const DEFER_MS = 500;

export interface AlertsWorker {
  evalWorker: Worker<EvalJobData, void>;
  webhookWorker: Worker<WebhookJobData, void>;
  webhooks: WebhookQueue;
  metrics: AlertsMetrics;
  start(): void;
  /** Stop taking jobs; jobs in hand finish (or go back to the queue on a stuck insert). */
  close(graceMs?: number): Promise<void>;
}

export function createAlertsWorker(deps: AlertsWorkerDeps): AlertsWorker {
  const { config, logger, redis } = deps;
  const prefix = config.QUEUE_PREFIX;
  const metrics = deps.metrics ?? createAlertsMetrics();
  const states = createStateStore(redis, prefix, {
    maxSeriesPerRule: config.ALERTS_MAX_SERIES_PER_RULE,
    maxSeriesPerProject: config.ALERTS_MAX_SERIES_PER_PROJECT,
  });
  const refusalLoggedAt = new Map<string, number>();
  const onRefused = (refused: RefusedSeries[]) => {
    metrics.seriesRefused.inc(refused.length);
    const now = Date.now();
    for (const { rule, series } of refused) {
      if (now - (refusalLoggedAt.get(rule.id) ?? 0) < REFUSAL_LOG_INTERVAL_MS) continue;
      refusalLoggedAt.set(rule.id, now);
      logger.warn(
        {
          rule: rule.id,
          project: rule.project,
          series,
          maxPerRule: config.ALERTS_MAX_SERIES_PER_RULE,
          maxPerProject: config.ALERTS_MAX_SERIES_PER_PROJECT,
        },
        "alert series over the cap: not evaluated",
      );
    }
    // Bounded like the series: rules that refused nothing for a while are forgotten.
    if (refusalLoggedAt.size > 10_000) refusalLoggedAt.clear();
  };
  const failureLoggedAt = new Map<string, number>();
  const onFailed = ({ stage, rule, series, error }: SeriesFailure) => {
    metrics.seriesFailures.inc({ stage });
    // Logged at most once a minute per rule: a tenant's bad rows cannot flood the log.
    const now = Date.now();
    if (now - (failureLoggedAt.get(rule.id) ?? 0) < REFUSAL_LOG_INTERVAL_MS) return;
    if (failureLoggedAt.size > 10_000) failureLoggedAt.clear();
    failureLoggedAt.set(rule.id, now);
    const err = error instanceof Error ? error.message : String(error);
    logger.error(
      { rule: rule.id, project: rule.project, series, stage, err: err.slice(0, 500) },
      "alert series evaluation failed: skipped, the batch's other series evaluated",
    );
  };
  const rules = createRuleStore(redis, prefix);
  const lanes = createDeliveryLanes({
    perProject: config.ALERTS_WEBHOOK_PER_PROJECT,
    perReceiver: config.ALERTS_WEBHOOK_PER_RECEIVER,
  });
  const breakers = createReceiverBreakers({
    failures: config.ALERTS_WEBHOOK_BREAKER_FAILURES,
    coolOffMs: config.ALERTS_WEBHOOK_BREAKER_COOLOFF_MS,
  });
  const guarded = createGuardedFetch(
    createDestinationPolicy({
      allow: config.ALERTS_WEBHOOK_ALLOW,
      resolve: createWebhookResolver(webhookDnsOf(config)),
    }),
  );
  const sink = createEventSink(
    deps.clickhouse,
    config.CLICKHOUSE_DATABASE,
    config.CLICKHOUSE_CLUSTER,
  );
  const webhooks = createWebhookQueue(redis, prefix, {
    attempts: config.ALERTS_WEBHOOK_ATTEMPTS,
    backoffMs: config.ALERTS_WEBHOOK_BACKOFF_MS,
    keepDeadDays: config.DLQ_RETENTION_DAYS,
  });
  webhooks.on("error", (err) => logger.warn({ err: err.message }, "queue error"));
  const shutdown = shutdownSignal();
  const runtime = <Data>(
    name: string,
    concurrency: number,
    process: (job: Job<Data>, token: string) => Promise<void>,
  ) =>
    createWorkerRuntime<Data>({
      names: { prefix, name },
      redis,
      concurrency,
      lockDurationMs: config.WORKER_LOCK_DURATION_MS,
      stalledIntervalMs: config.WORKER_STALLED_INTERVAL_MS,
      logger,
      // A stalled job (its worker died) is taken again: evaluation and delivery are idempotent.
      process,
    });

  const declarationsLoggedAt = new Map<string, number>();
  /**
   * The declarations of the projects whose rules this batch runs. A project's that cannot be read
   * are none for this batch (counted, logged): its series are evaluated on what they state, and
   * the other tenants' evaluation never waits on it nor fails with it.
   */
  async function declarationsOf(projects: Set<string>) {
    const out = new Map<string, ProjectDeclarations>();
    const reader = deps.declarations;
    if (!reader) return out;
    await Promise.all(
      [...projects].map(async (project) => {
        try {
          out.set(project, await reader.forProject(project));
        } catch (error) {
          metrics.seriesFailures.inc({ stage: "declarations" });
          const now = Date.now();
          if (now - (declarationsLoggedAt.get(project) ?? 0) < REFUSAL_LOG_INTERVAL_MS) return;
          if (declarationsLoggedAt.size > 10_000) declarationsLoggedAt.clear();
          declarationsLoggedAt.set(project, now);
          const err = error instanceof Error ? error.message : String(error);
          logger.warn(
            { project, err: err.slice(0, 500) },
            "declared limits unreadable: the project's series evaluated without them",
          );
        }
      }),
    );
    return out;
  }

  async function evaluate(job: Job<EvalJobData>): Promise<void> {
    const { token, rules: ruleSet, rows } = job.data;
    const declarations = await declarationsOf(new Set(ruleSet.map((r) => r.project)));
    const events = await evaluateBatch(
      states,
      token,
      ruleSet,
      rows,
      onRefused,
      deps.deriveWindows,
      onFailed,
      declarations,
    );
    if (events.length > 0) {
      await retryUntilDone(() => sink.insert(events, token), {
        isFinal: (e) => classifyInsertError(e) === "data",
        signal: shutdown.signal,
        maxDelayMs: config.RETRY_MAX_DELAY_MS,
        onRetry: (err, attempt) =>
          logger.warn({ err: describeError(err), attempt }, "alert events insert failed: retrying"),
      });
      const urls = new Map(ruleSet.map((r) => [r.id, r.webhook]));
      await webhooks.addBulk(
        events.map((e) => ({
          name: WEBHOOK_JOB,
          data: {
            v: 1 as const,
            event_id: e.id,
            rule_id: e.rule_id,
            project: e.project,
            url: urls.get(e.rule_id) ?? "",
            body: webhookPayload(e),
          },
          opts: { jobId: e.id },
        })),
      );
      for (const e of events) {
        logger.info(
          {
            event: e.id,
            rule: e.rule_id,
            project: e.project,
            level: e.level,
            used_pct: e.used_pct,
          },
          "alert",
        );
      }
    }
    await states.clearOutbox(token);
  }

  async function deliver(job: Job<WebhookJobData>, token: string): Promise<void> {
    const { rule_id, url } = job.data;
    // Jobs queued before deliveries carried their project are laned by their rule's project.
    const project = job.data.project ?? (await rules.get(rule_id))?.project ?? rule_id;
    const receiver = receiverOf(project, url);
    const release = lanes.enter(project, receiver);
    if (!release) {
      // Out of the slot, back to the queue without using an attempt: other projects' deliveries
      // behind it go first.
      await job.moveToDelayed(Date.now() + DEFER_MS + Math.floor(Math.random() * DEFER_MS), token);
      throw new DelayedError();
    }
    try {
      if (!breakers.allow(receiver)) {
        const until = new Date(breakers.openUntil(receiver) ?? Date.now()).toISOString();
        throw new Error(`receiver not answering: not tried until ${until}`);
      }
      await send(job.data, receiver);
    } finally {
      release();
    }
  }

  async function send(data: WebhookJobData, receiver: string): Promise<void> {
    const { event_id, rule_id, url, body } = data;
    const secret = await rules.secret(rule_id);
    if (secret === null) throw new UnrecoverableError(`rule ${rule_id} was removed`);
    const res = await sendWebhook({
      url,
      id: event_id,
      body,
      secret,
      timeoutMs: config.ALERTS_WEBHOOK_TIMEOUT_MS,
      fetch: guarded.fetch,
    });
    // A refused destination stays refused until an operator allows it: dead-lettered at once.
    if (res.refused) throw new UnrecoverableError(`rule ${rule_id}: webhook ${res.error}`);
    breakers.record(receiver, res.status !== null);
    if (!res.ok) {
      throw new Error(
        res.status === null ? `no answer: ${res.error}` : `receiver answered ${res.status}`,
      );
    }
  }

  const evalRuntime = runtime(EVAL_QUEUE, config.ALERTS_CONCURRENCY, evaluate);
  const webhookRuntime = runtime(WEBHOOK_QUEUE, config.ALERTS_WEBHOOK_CONCURRENCY, deliver);
  const evalWorker = evalRuntime.worker;
  const webhookWorker = webhookRuntime.worker;
  const evalQueue = createEvalQueue(redis, prefix);
  evalQueue.on("error", (err) => logger.warn({ err: err.message }, "queue error"));
  metrics.queues.push(evalQueue, webhooks);
  for (const [queue, r] of [
    [EVAL_QUEUE, evalRuntime],
    [WEBHOOK_QUEUE, webhookRuntime],
  ] as const) {
    metrics.watched.push({ queue, activity: r.activity, oldestWaitingAt: r.oldestWaitingAt });
  }
  evalWorker.on("failed", (job, err) => {
    metrics.evaluationFailures.inc();
    logger.error({ jobId: job?.id, err: err.message }, "alert evaluation failed");
  });
  webhookWorker.on("completed", (job) => {
    metrics.webhooksDelivered.inc();
    // BullMQ has counted this attempt by the time the job is completed.
    logger.info({ event: job.data.event_id, attempts: job.attemptsMade }, "webhook delivered");
  });
  webhookWorker.on("failed", (job, err) => {
    if (!job) return;
    const dead = job.attemptsMade >= (job.opts.attempts ?? 1) || err instanceof UnrecoverableError;
    // The URL may carry a token in its query: only its origin is logged.
    const origin = URL.canParse(job.data.url) ? new URL(job.data.url).origin : "(invalid url)";
    const fields = {
      event: job.data.event_id,
      to: origin,
      attempt: job.attemptsMade,
      err: err.message,
    };
    metrics.webhookFailures.inc();
    if (dead) metrics.webhooksDeadLettered.inc();
    if (dead) logger.error(fields, "webhook dead-lettered");
    else logger.warn(fields, "webhook failed: will retry");
  });

  return {
    evalWorker,
    webhookWorker,
    webhooks,
    metrics,
    start() {
      evalRuntime.start();
      webhookRuntime.start();
    },
    async close(graceMs = 20_000) {
      const timer = setTimeout(() => shutdown.abort(), graceMs);
      try {
        await Promise.all([evalRuntime.close(), webhookRuntime.close()]);
      } finally {
        clearTimeout(timer);
      }
      await webhooks.close();
      await evalQueue.close();
      guarded.close();
    },
  };
}
