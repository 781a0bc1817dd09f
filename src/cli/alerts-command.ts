import { TEST_EVENT_TYPE, testEvent, webhookPayload } from "../alerts/alert-event.js";
import { createDestinationPolicy, DestinationRefusedError } from "../alerts/destination-policy.js";
import { createGuardedFetch } from "../alerts/guarded-fetch.js";
import { createWebhookQueue, type WebhookQueue } from "../alerts/queues.js";
import { type AlertRule, RuleError, type RuleInput } from "../alerts/rule.js";
import { createRuleStore, type RuleStore } from "../alerts/rule-store.js";
import { sendWebhook } from "../alerts/webhook-sender.js";
import { createClickHouse } from "../clickhouse/client.js";
import type { Config } from "../config.js";
import type { RedisClient } from "../redis/connections.js";
import { cliConfig, print, table } from "./context.js";
import { CliError, UsageError } from "./errors.js";
import { closeRedis, connectRedis } from "./redis.js";

// `headroom alerts …`: rules in Redis, their history in ClickHouse, their dead letters in the
// webhook queue's failed set. Arguments are parsed and checked in program.ts. A rule's secret is
// printed once, by `add`, and never again.

interface JsonOption {
  json: boolean;
}

async function withStore<T>(
  run: (store: RuleStore, redis: RedisClient, config: Config) => Promise<T>,
): Promise<T> {
  const config = cliConfig();
  const redis = await connectRedis(config);
  try {
    return await run(createRuleStore(redis, config.QUEUE_PREFIX), redis, config);
  } catch (err) {
    throw err instanceof RuleError ? new UsageError(err.message) : err;
  } finally {
    await closeRedis(redis);
  }
}

const filters = (r: AlertRule) =>
  [r.provider && `provider=${r.provider}`, r.model && `model=${r.model}`, r.app && `app=${r.app}`]
    .filter(Boolean)
    .join(" ") || "-";

export const alertsAdd = (input: RuleInput & JsonOption) =>
  withStore(async (store, _redis, config) => {
    const { json, ...fields } = input;
    await checkDestination(config, fields);
    const { rule, secret } = await store.create(fields);
    print(json, { ...rule, secret }, () =>
      [
        `rule:     ${rule.id}`,
        `project:  ${rule.project} (${filters(rule)})`,
        `metric:   ${rule.metric} (${rule.window ? `${rule.window} windows` : "every window"}): warning at ${rule.warn_pct}%, critical at ${rule.critical_pct}%`,
        `webhook:  ${rule.webhook}`,
        `secret:   ${secret}`,
        "",
        "The signing secret is shown only now: give it to the receiver to verify signatures.",
      ].join("\n"),
    );
  });

/** A rule's webhook must point where the destination policy allows (see SECURITY.md). */
async function checkDestination(config: Config, rule: RuleInput): Promise<void> {
  // A malformed URL is the rule schema's to report.
  if (!URL.canParse(rule.webhook)) return;
  try {
    await createDestinationPolicy({ allow: config.ALERTS_WEBHOOK_ALLOW }).checkUrl(rule.webhook);
  } catch (err) {
    const why =
      err instanceof DestinationRefusedError
        ? err.message
        : `its host cannot be resolved (${(err as Error).message})`;
    throw new UsageError(
      `invalid rule: webhook ${new URL(rule.webhook).origin} for project ${rule.project}: ${why}`,
    );
  }
}

export const alertsList = (opts: { project?: string } & JsonOption) =>
  withStore(async (store) => {
    const rules = await store.list(opts.project);
    print(opts.json, rules, () =>
      rules.length === 0
        ? "no alert rules"
        : table(
            [
              "RULE ID",
              "PROJECT",
              "FILTERS",
              "METRIC",
              "WINDOW",
              "WARN",
              "CRIT",
              "COOLDOWN",
              "WEBHOOK",
            ],
            rules.map((r) => [
              r.id,
              r.project,
              filters(r),
              r.metric,
              r.window ?? "every",
              `${r.warn_pct}%`,
              `${r.critical_pct}%`,
              `${r.cooldown_s}s`,
              r.webhook,
            ]),
          ),
    );
  });

export const alertsRemove = (id: string, opts: JsonOption) =>
  withStore(async (store) => {
    if (!(await store.remove(id))) throw new UsageError(`no alert rule ${id}`);
    print(opts.json, { id, removed: true }, () => `removed ${id}`);
  });

export const alertsTest = (id: string, opts: JsonOption) =>
  withStore(async (store, _redis, config) => {
    const rule = await store.get(id);
    const secret = rule && (await store.secret(id));
    if (!rule || !secret) throw new UsageError(`no alert rule ${id}`);
    const event = testEvent(rule);
    const guarded = createGuardedFetch(
      createDestinationPolicy({ allow: config.ALERTS_WEBHOOK_ALLOW }),
    );
    const res = await sendWebhook({
      url: rule.webhook,
      id: event.id,
      body: webhookPayload(event, TEST_EVENT_TYPE),
      secret,
      timeoutMs: config.ALERTS_WEBHOOK_TIMEOUT_MS,
      fetch: guarded.fetch,
    }).finally(() => guarded.close());
    const out = { id: event.id, webhook: rule.webhook, status: res.status, ok: res.ok };
    print(opts.json, out, () =>
      res.ok
        ? `sent test event ${event.id}: the receiver answered ${res.status}`
        : `test event ${event.id} not delivered: ${res.status ?? res.error}`,
    );
    if (!res.ok) throw new CliError(`the webhook receiver did not accept the test event`);
  });

interface HistoryRow {
  at: string;
  event_id: string;
  rule_id: string;
  project_id: string;
  provider: string;
  model: string;
  app: string;
  metric: string;
  level: string;
  used_pct: number;
  exhaustion_eta_s: number | null;
}

export async function alertsHistory(opts: { project?: string; limit: number } & JsonOption) {
  const config = cliConfig();
  const client = createClickHouse(config);
  try {
    const where = opts.project ? "WHERE project_id = {project:String}" : "";
    const rs = await client.query({
      query: `SELECT toString(at) AS at, event_id, rule_id, project_id, provider, model, app,
          metric, toString(level) AS level, used_pct, exhaustion_eta_s
        FROM ${config.CLICKHOUSE_DATABASE}.alert_events_v ${where}
        ORDER BY at DESC, event_id LIMIT {limit:UInt32}`,
      query_params: { project: opts.project ?? "", limit: opts.limit },
      format: "JSONEachRow",
    });
    const rows = await rs.json<HistoryRow>();
    print(opts.json, rows, () =>
      rows.length === 0
        ? "no alert events"
        : table(
            ["AT", "PROJECT", "PROVIDER", "MODEL", "APP", "METRIC", "LEVEL", "USED", "ETA", "RULE"],
            rows.map((r) => [
              r.at,
              r.project_id,
              r.provider,
              r.model || "-",
              r.app,
              r.metric,
              r.level,
              `${r.used_pct}%`,
              r.exhaustion_eta_s === null ? null : `${r.exhaustion_eta_s}s`,
              r.rule_id,
            ]),
          ),
    );
  } finally {
    await client.close();
  }
}

async function withWebhooks(run: (queue: WebhookQueue) => Promise<void>) {
  const config = cliConfig();
  const redis = await connectRedis(config);
  const queue = createWebhookQueue(redis, config.QUEUE_PREFIX, {
    attempts: config.ALERTS_WEBHOOK_ATTEMPTS,
    backoffMs: config.ALERTS_WEBHOOK_BACKOFF_MS,
    keepDeadDays: config.DLQ_RETENTION_DAYS,
  });
  try {
    await run(queue);
  } finally {
    await queue.close();
    await closeRedis(redis);
  }
}

/** Webhooks that failed every attempt: the alerts dead-letter set. */
export const alertsDead = (opts: JsonOption) =>
  withWebhooks(async (queue) => {
    const jobs = (await queue.getFailed(0, -1)).map((j) => ({
      id: j.id,
      rule_id: j.data.rule_id,
      url: j.data.url,
      attempts: j.attemptsMade,
      reason: j.failedReason,
      failed_at: j.finishedOn ? new Date(j.finishedOn).toISOString() : null,
    }));
    print(opts.json, jobs, () =>
      jobs.length === 0
        ? "the alerts dead-letter set is empty"
        : table(
            ["EVENT ID", "RULE", "ATTEMPTS", "FAILED AT", "REASON"],
            jobs.map((j) => [String(j.id), j.rule_id, j.attempts, j.failed_at, j.reason ?? ""]),
          ),
    );
  });

/** Sends dead-lettered webhooks again, with a fresh set of attempts. */
export const alertsReplay = (target: { id: string } | { all: true }) =>
  withWebhooks(async (queue) => {
    const jobs = "all" in target ? await queue.getFailed(0, -1) : [await queue.getJob(target.id)];
    for (const job of jobs) {
      if (!job || !(await job.isFailed())) {
        throw new UsageError(`no dead-lettered webhook ${"id" in target ? target.id : ""}`);
      }
      await job.retry("failed", { resetAttemptsMade: true, resetAttemptsStarted: true });
      process.stdout.write(`replayed ${job.id}\n`);
    }
  });
