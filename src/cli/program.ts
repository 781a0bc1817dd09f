import { Command, Option, type OutputConfiguration } from "commander";
import { SCOPES, type Scope } from "../keys/key-format.js";
import { packageVersion } from "../lib/repo-root.js";
import { WINDOW_LENGTHS, type WindowLength } from "../providers/window.js";
import * as parse from "./arg-parsers.js";
import { addDeclarations } from "./declarations-program.js";
import { UsageError } from "./errors.js";

// The `headroom` command line: every command, its arguments and options, and its help. Parsing
// and help need no service; each command's code (and its clients) is loaded only when it runs.

const CONFIG_NOTE = `
Configuration comes from the environment (docs/configuration.md). While the local stack runs
(npm start), its Redis and ClickHouse are found through stack.json in HEADROOM_DATA_DIR.
Exit codes: 0 done, 1 failed (e.g. a ClickHouse error), 2 usage or configuration error.`;

const KEYS_EXAMPLES = `
Examples:
  headroom keys create --project acme --plan pro --json   # prints the key once
  headroom keys create --project acme --scope read        # a read API key (hrr_…)
  headroom keys import --project acme --key dlm_…         # keep a key from the hosted service
  headroom keys list [--project acme] [--json]
  headroom keys revoke key_…
  headroom keys rotate key_… [--expires-in 1d]            # a new key; the old one works 1 day more
  headroom keys create --scope admin                      # an operator's key for the control plane
  headroom keys create --project acme --scope manage      # manages acme's keys and alert rules
  headroom keys set-plan --project acme --plan free [--monthly 10000|none] [--burst 50] [--capacity 250]`;

const DLQ_EXAMPLES = `
Examples:
  headroom dlq list [--json]
  headroom dlq status [--json]                     # failed jobs, retention, manifests held
  headroom dlq show JOB_ID
  headroom dlq replay JOB_ID [--rows fixed.json]   # fixed.json: reports as 'show' prints them
  headroom dlq replay --all`;

const ALERTS_EXAMPLES = `
Examples:
  headroom alerts add --project acme --metric requests --warn 70 --critical 90 \\
      --webhook https://example.com/hooks/headroom [--provider openai] [--cooldown 10m] [--json]
  headroom alerts list [--project acme] [--json]
  headroom alerts test alr_…          # sends a signed test event to the rule's webhook
  headroom alerts history [--project acme] [--json]
  headroom alerts dead [--json]        # webhooks that failed every attempt
  headroom alerts replay evt_… | --all
  headroom alerts remove alr_…
Alerts are evaluated by the alerts worker (workers/alerts.ts), which \`npm start\` runs.`;

interface JsonOption {
  json: boolean;
}

export function buildProgram(output?: OutputConfiguration): Command {
  const program = new Command("headroom")
    .description("Headroom: ingestion service for AI-provider rate-limit reports")
    // Errors come back to runCli as exceptions; these settings reach every subcommand.
    .exitOverride()
    .version(packageVersion(), "-V, --version", "print the version")
    .showHelpAfterError("(add --help for usage)")
    .helpCommand("help [command]", "show help for a command")
    .addHelpText("after", CONFIG_NOTE);
  if (output) program.configureOutput(output);

  addKeys(program);
  program
    .command("audit")
    .description("the control plane's audit log, newest first: who changed what, and when")
    .option("--project <id>", "only this project")
    .option("--limit <n>", "at most this many", parse.positiveInt, 100)
    .option("--json", "print JSON", false)
    .action(async (opts: { project?: string; limit: number } & JsonOption) =>
      (await import("./keys-command.js")).auditList(opts),
    );
  addDlq(program);
  addAlerts(program);
  addDeclarations(program);

  program
    .command("backup")
    .description(
      "write projects, keys (hashes), plans, alert rules, webhook secrets, declared limits and pools, and the audit log to FILE (JSON)",
    )
    .argument("<file>", "where to write it; keep it off this host: it holds secrets")
    .action(async (file: string) => (await import("./backup-command.js")).backupCommand(file));

  program
    .command("restore")
    .description(
      "write a backup's keys into an empty Redis (every key works again); refuses a Redis in use unless --merge",
    )
    .argument("<file>", "a file written by `headroom backup`")
    .option(
      "--merge",
      "into a Redis in use: add what it lacks; revocations, rule removals, plan changes and declarations made since the backup stand",
    )
    .action(async (file: string, opts: { merge?: boolean }) =>
      (await import("./backup-command.js")).restoreCommand(file, opts),
    );

  program
    .command("import")
    .description(
      "send reports (NDJSON, a JSON array, or the original service's export) through the edge's batch endpoint",
    )
    .argument("<file>", "the file, or - for stdin")
    .requiredOption("--key <key>", "the project's key")
    .option("--url <url>", "the edge (default: http://127.0.0.1:PORT)")
    .option("--batch <n>", "reports per request", parse.positiveInt, 1000)
    .option("--concurrency <n>", "requests at once", parse.positiveInt, 4)
    .action(
      async (file: string, o: { key: string; url?: string; batch: number; concurrency: number }) =>
        (await import("./import-command.js")).importCommand(file, o),
    );

  program
    .command("migrate")
    .description("apply pending ClickHouse schema migrations (idempotent)")
    .action(async () => (await import("./clickhouse-commands.js")).migrateCommand());

  program
    .command("query")
    .description(
      "run SQL in Headroom's ClickHouse database (CLICKHOUSE_DATABASE), read-only unless --write",
    )
    .argument("<sql...>", "the query; several arguments are joined with spaces")
    .option("--write", "allow writes and schema changes (INSERT, ALTER, DROP …)", false)
    .option(
      "--format <format>",
      "output format when the query names none",
      "PrettyCompactMonoBlock",
    )
    .addHelpText(
      "after",
      '\nExample:\n  headroom query "SELECT provider, count() FROM reports GROUP BY provider"',
    )
    .action(async (sql: string[], opts: { format: string; write: boolean }) =>
      (await import("./clickhouse-commands.js")).queryCommand(sql.join(" "), opts),
    );

  program
    .command("rederive-windows")
    .description(
      "apply this release's provider parsers again to stored reports' kept headers and error bodies, rewriting their windows where they changed (in place: no view counts a report twice)",
    )
    .option("--project <id>", "only this project")
    .option("--since <period>", "only reports of this long ago or later: 30m, 24h, 7d", parse.since)
    .option(
      "--parser <name@version>",
      "only reports whose windows this parser made, e.g. anthropic@1",
    )
    .option("--dry-run", "count the reports whose windows would change, change nothing", false)
    .option("--json", "print JSON", false)
    .action(
      async (opts: {
        project?: string;
        since?: string;
        parser?: string;
        dryRun: boolean;
        json: boolean;
      }) => (await import("./clickhouse-commands.js")).rederiveCommand(opts),
    );

  program
    .command("stats")
    .description("reports per provider/model/app over a period, and the current headroom")
    .option("--project <id>", "only this project")
    .option("--since <period>", "how far back: 30m, 24h, 7d", parse.since, "24h")
    .option("--json", "print JSON", false)
    .action(async (opts: { project?: string; since: string; json: boolean }) =>
      (await import("./stats-command.js")).statsCommand(opts),
    );

  program
    .command("clickhouse")
    .description("the embedded ClickHouse")
    .command("serve")
    .description("serve an embedded ClickHouse data directory over ClickHouse's HTTP interface")
    .option("--path <dir>", "data directory (default: CLICKHOUSE_PATH)")
    .option("--port <n>", "listen port (0: any free port)", parse.port, 8123)
    .option("--host <host>", "listen address", "127.0.0.1")
    .addOption(
      new Option("--fault-error-rate <r>", "share of queries that fail on purpose (tests)")
        .argParser(parse.rate)
        .default(0),
    )
    .action(async (opts: { path?: string; port: number; host: string; faultErrorRate: number }) =>
      (await import("../local/clickhouse/serve.js")).serveClickHouse(opts),
    );

  return program;
}

function addKeys(program: Command): void {
  const keys = program
    .command("keys")
    .description("project keys: create, import, list, revoke, rotate, set-plan")
    .addHelpText("after", KEYS_EXAMPLES);
  const run = async () => import("./keys-command.js");

  keys
    .command("create")
    .description("create a key for a project (or an admin key, of none); the key is printed once")
    .option("--project <id>", "project id (every scope but admin)")
    .option("--plan <plan>", "free, pro, unlimited or a plan from PLANS (default: DEFAULT_PLAN)")
    .addOption(
      new Option(
        "--scope <scope>",
        "report: POST /api/report; read: the read API; manage: the project's keys and alert " +
          "rules over the control plane; admin: the whole control plane",
      )
        .choices(SCOPES)
        .default("report"),
    )
    .option("--json", "print JSON", false)
    .action(async (opts: { project?: string; plan?: string; scope: Scope } & JsonOption) => {
      if (opts.scope === "admin" ? opts.project !== undefined : opts.project === undefined) {
        throw new UsageError(
          opts.scope === "admin"
            ? "an admin key belongs to no project: leave out --project"
            : "required option '--project <id>' not specified",
        );
      }
      return (await run()).keysCreate(opts.project, opts);
    });

  keys
    .command("import")
    .description("keep an existing key (e.g. dlm_… from the original hosted service)")
    .requiredOption("--project <id>", "project id")
    .requiredOption("--key <key>", "the key")
    .option("--plan <plan>", "plan of the project (default: DEFAULT_PLAN)")
    .option("--json", "print JSON", false)
    .action(async (opts: { project: string; key: string; plan?: string } & JsonOption) =>
      (await run()).keysImport(opts.project, opts.key, opts),
    );

  keys
    .command("list")
    .description("list keys (ids, never the keys themselves)")
    .option("--project <id>", "only this project")
    .option("--json", "print JSON", false)
    .action(async (opts: { project?: string } & JsonOption) => (await run()).keysList(opts));

  keys
    .command("revoke")
    .description("revoke a key; it is refused everywhere within a second")
    .argument("<key-id>", "the key's id, as `keys list` shows it")
    .option("--json", "print JSON", false)
    .action(async (keyId: string, opts: JsonOption) => (await run()).keysRevoke(keyId, opts));

  keys
    .command("rotate")
    .description("a new key for the same key id; the old one works until --expires-in has passed")
    .argument("<key-id>", "the key's id, as `keys list` shows it")
    .option(
      "--expires-in <duration>",
      "how long the old key keeps working: 0, 90s, 10m, 24h, 1d",
      parse.duration,
      86_400,
    )
    .option("--json", "print JSON", false)
    .action(async (keyId: string, opts: { expiresIn: number } & JsonOption) =>
      (await run()).keysRotate(keyId, opts),
    );

  keys
    .command("set-plan")
    .description("put a project on a plan, optionally overriding its numbers")
    .requiredOption("--project <id>", "project id")
    .requiredOption("--plan <plan>", "plan name")
    .option("--monthly <n|none>", "reports per calendar month, or none", parse.quota)
    .option("--burst <n>", "reports per second, sustained", parse.positiveInt)
    .option("--capacity <n>", "reports at once (the burst's bucket size)", parse.positiveInt)
    .option("--json", "print JSON", false)
    .action(
      async (
        opts: {
          project: string;
          plan: string;
          monthly?: number | "none";
          burst?: number;
          capacity?: number;
        } & JsonOption,
      ) => (await run()).keysSetPlan(opts.project, opts.plan, opts),
    );
}

function addDlq(program: Command): void {
  const dlq = program
    .command("dlq")
    .description("the dead-letter set: reports ClickHouse refused, to inspect and replay")
    .addHelpText("after", DLQ_EXAMPLES);
  const run = async () => import("./dlq-command.js");

  dlq
    .command("list")
    .description("list failed jobs with their reason")
    .option("--json", "print JSON", false)
    .action(async (opts: JsonOption) => (await run()).dlqList(opts));

  dlq
    .command("status")
    .description(
      "per shard: failed jobs, the oldest, when it expires (DLQ_RETENTION_DAYS), and manifests held",
    )
    .option("--json", "print JSON", false)
    .action(async (opts: JsonOption) => (await run()).dlqStatus(opts));

  dlq
    .command("show")
    .description("print a failed job's reports as JSON")
    .argument("<job-id>", "the job's id, as `dlq list` shows it")
    .action(async (id: string) => (await run()).dlqShow(id));

  dlq
    .command("replay")
    .description("put failed jobs back in the queue; rows already stored are not stored twice")
    .argument("[job-id]", "the job to replay")
    .option("--rows <file>", "replace the job's reports with a JSON array, as `show` prints them")
    .option("--all", "replay every failed job", false)
    .action(async (id: string | undefined, opts: { rows?: string; all: boolean }) => {
      if (opts.all && (id !== undefined || opts.rows !== undefined)) {
        throw new UsageError("dlq replay: --all takes no job id and no --rows");
      }
      if (opts.all) return (await run()).dlqReplay({ all: true });
      if (id === undefined) throw new UsageError("dlq replay: give a job id, or --all");
      return (await run()).dlqReplay({ id, rows: opts.rows });
    });
}

function addAlerts(program: Command): void {
  const alerts = program
    .command("alerts")
    .description("alert rules, their history, and their webhook dead letters")
    .addHelpText("after", ALERTS_EXAMPLES);
  const run = async () => import("./alerts-command.js");

  alerts
    .command("add")
    .description("add a rule; prints its id and, once, its webhook signing secret")
    .requiredOption("--project <id>", "project id")
    .addOption(
      new Option(
        "--metric <dimension>",
        "what to watch, as % of the limit used: requests, tokens, credits, input_tokens, output_tokens, or any dimension a provider's windows name",
      )
        .argParser(parse.dimension)
        .makeOptionMandatory(),
    )
    .requiredOption("--warn <pct>", "warning threshold, % used", parse.percent)
    .requiredOption("--critical <pct>", "critical threshold, % used", parse.percent)
    .requiredOption("--webhook <url>", "where events are POSTed (signed, Standard Webhooks)")
    .option("--provider <name>", "only this provider")
    .option("--model <name>", "only this model")
    .option("--app <name>", "only this app")
    .addOption(
      new Option(
        "--window <length>",
        "only the provider's windows of this length; without it, every window of the metric",
      ).choices([...WINDOW_LENGTHS]),
    )
    .addOption(
      new Option("--cooldown <duration>", "quiet time after an alert: 90s, 10m, 1h")
        .argParser(parse.duration)
        // The default in the form the option takes, not the seconds it parses to.
        .default(600, "10m"),
    )
    .option(
      "--hysteresis <pct>",
      "points below a threshold usage must fall before an alert resolves",
      parse.points,
      5,
    )
    .option("--json", "print JSON", false)
    .action(
      async (
        opts: {
          project: string;
          metric: string;
          warn: number;
          critical: number;
          webhook: string;
          provider?: string;
          model?: string;
          app?: string;
          window?: WindowLength;
          cooldown: number;
          hysteresis: number;
        } & JsonOption,
      ) =>
        (await run()).alertsAdd({
          project: opts.project,
          metric: opts.metric,
          warn_pct: opts.warn,
          critical_pct: opts.critical,
          webhook: opts.webhook,
          provider: opts.provider ?? null,
          model: opts.model ?? null,
          app: opts.app ?? null,
          window: opts.window ?? null,
          cooldown_s: opts.cooldown,
          hysteresis_pct: opts.hysteresis,
          json: opts.json,
        }),
    );

  alerts
    .command("list")
    .description("list rules (never their secrets)")
    .option("--project <id>", "only this project")
    .option("--json", "print JSON", false)
    .action(async (opts: { project?: string } & JsonOption) => (await run()).alertsList(opts));

  alerts
    .command("remove")
    .description("remove a rule; its pending webhooks are not sent (they are dead-lettered)")
    .argument("<rule-id>", "the rule's id, as `alerts list` shows it")
    .option("--json", "print JSON", false)
    .action(async (id: string, opts: JsonOption) => (await run()).alertsRemove(id, opts));

  alerts
    .command("test")
    .description("send a signed test event (type headroom.alert.test) to the rule's webhook")
    .argument("<rule-id>", "the rule's id")
    .option("--json", "print JSON", false)
    .action(async (id: string, opts: JsonOption) => (await run()).alertsTest(id, opts));

  alerts
    .command("history")
    .description("alert events, newest first (ClickHouse alert_events_v)")
    .option("--project <id>", "only this project")
    .option("--limit <n>", "at most this many", parse.positiveInt, 100)
    .option("--json", "print JSON", false)
    .action(async (opts: { project?: string; limit: number } & JsonOption) =>
      (await run()).alertsHistory(opts),
    );

  alerts
    .command("dead")
    .description("webhooks that failed every attempt (the alerts dead-letter set)")
    .option("--json", "print JSON", false)
    .action(async (opts: JsonOption) => (await run()).alertsDead(opts));

  alerts
    .command("replay")
    .description("send dead-lettered webhooks again, with fresh attempts")
    .argument("[event-id]", "the webhook's event id, as `alerts dead` shows it")
    .option("--all", "replay every dead-lettered webhook", false)
    .action(async (id: string | undefined, opts: { all: boolean }) => {
      if (opts.all === (id !== undefined)) {
        throw new UsageError("alerts replay: give an event id, or --all");
      }
      return (await run()).alertsReplay(id === undefined ? { all: true } : { id });
    });
}
