import { createWebhookQueue, type WebhookQueue } from "../alerts/queues.js";
import type { AlertRule, RuleInput } from "../alerts/rule.js";
import { createClickHouse } from "../clickhouse/client.js";
import { cliConfig, print, table } from "./context.js";
import { withControl } from "./control.js";
import { CliError, UsageError } from "./errors.js";
import { closeRedis, connectRedis } from "./redis.js";

// `headroom alerts …`: rules in Redis (through the control plane's functions, which the HTTP
// routes call too, and which write the audit log), their history in ClickHouse, their dead
// letters in the webhook queue's failed set. Arguments are parsed and checked in program.ts. A rule's secret is
// printed once, by `add`, and never again.

interface JsonOption {
  json: boolean;
}

const filters = (r: AlertRule) =>
  [r.provider && `provider=${r.provider}`, r.model && `model=${r.model}`, r.app && `app=${r.app}`]
    .filter(Boolean)
    .join(" ") || "-";

export const alertsAdd = (input: RuleInput & JsonOption) =>
  withControl(async (control, cli) => {
    const { json, project, ...fields } = input;
    const { secret, ...rule } = await control.createRule(cli, project, fields);
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

export const alertsList = (opts: { project?: string } & JsonOption) =>
  withControl(async (control, cli) => {
    const rules = await control.listRules(cli, opts.project);
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
  withControl(async (control, cli) => {
    const out = await control.removeRule(cli, id);
    print(opts.json, out, () => `removed ${id}`);
  });

export const alertsTest = (id: string, opts: JsonOption) =>
  withControl(async (control, cli) => {
    const res = await control.testRule(cli, id);
    const out = { id: res.id, webhook: res.webhook, status: res.status, ok: res.ok };
    print(opts.json, out, () =>
      res.ok
        ? `sent test event ${res.id}: the receiver answered ${res.status}`
        : `test event ${res.id} not delivered: ${res.status ?? res.error}`,
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
  dimension: string;
  window: string | null;
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
          metric, dimension, \`window\`, toString(level) AS level, used_pct, exhaustion_eta_s
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
            [
              "AT",
              "PROJECT",
              "PROVIDER",
              "MODEL",
              "APP",
              "METRIC",
              "DIMENSION",
              "WINDOW",
              "LEVEL",
              "USED",
              "ETA",
              "RULE",
            ],
            rows.map((r) => [
              r.at,
              r.project_id,
              r.provider,
              r.model || "-",
              r.app,
              r.metric,
              r.dimension,
              r.window,
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
