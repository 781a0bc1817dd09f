import { Command, type OutputConfiguration, Option } from "commander";
import * as parse from "./arg-parsers.js";
import { UsageError } from "./errors.js";

// The `headroom` command line: every command, its arguments and options, and its help. Parsing
// and help need no service; each command's code (and its clients) is loaded only when it runs.

const CONFIG_NOTE = `
Configuration comes from the environment (see the README). While the local stack runs
(npm start), its Redis and ClickHouse are found through stack.json in HEADROOM_DATA_DIR.
Exit codes: 0 done, 1 failed (e.g. a ClickHouse error), 2 usage or configuration error.`;

const KEYS_EXAMPLES = `
Examples:
  headroom keys create --project acme --plan pro --json   # prints the key once
  headroom keys import --project acme --key dlm_…         # keep a key from the hosted service
  headroom keys list [--project acme] [--json]
  headroom keys revoke key_…
  headroom keys set-plan --project acme --plan free [--monthly 10000|none] [--burst 50]`;

const DLQ_EXAMPLES = `
Examples:
  headroom dlq list [--json]
  headroom dlq show JOB_ID
  headroom dlq replay JOB_ID [--rows fixed.json]   # fixed.json: reports as 'show' prints them
  headroom dlq replay --all`;

interface JsonOption {
  json: boolean;
}

export function buildProgram(output?: OutputConfiguration): Command {
  const program = new Command("headroom")
    .description("Headroom: ingestion service for AI-provider rate-limit reports")
    // Errors come back to runCli as exceptions; these settings reach every subcommand.
    .exitOverride()
    .showHelpAfterError("(add --help for usage)")
    .helpCommand("help [command]", "show help for a command")
    .addHelpText("after", CONFIG_NOTE);
  if (output) program.configureOutput(output);

  addKeys(program);
  addDlq(program);

  program
    .command("migrate")
    .description("apply pending ClickHouse schema migrations (idempotent)")
    .action(async () => (await import("./clickhouse-commands.js")).migrateCommand());

  program
    .command("query")
    .description("run SQL in Headroom's ClickHouse database (CLICKHOUSE_DATABASE)")
    .argument("<sql...>", "the query; several arguments are joined with spaces")
    .option(
      "--format <format>",
      "output format when the query names none",
      "PrettyCompactMonoBlock",
    )
    .addHelpText(
      "after",
      '\nExample:\n  headroom query "SELECT provider, count() FROM reports GROUP BY provider"',
    )
    .action(async (sql: string[], opts: { format: string }) =>
      (await import("./clickhouse-commands.js")).queryCommand(sql.join(" "), opts),
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
    .description("project keys: create, import, list, revoke, set-plan")
    .addHelpText("after", KEYS_EXAMPLES);
  const run = async () => import("./keys-command.js");

  keys
    .command("create")
    .description("create a key for a project; the key is printed once")
    .requiredOption("--project <id>", "project id")
    .option("--plan <plan>", "free, pro, unlimited or a plan from PLANS (default: DEFAULT_PLAN)")
    .option("--json", "print JSON", false)
    .action(async (opts: { project: string; plan?: string } & JsonOption) =>
      (await run()).keysCreate(opts.project, opts),
    );

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
    .command("set-plan")
    .description("put a project on a plan, optionally overriding its numbers")
    .requiredOption("--project <id>", "project id")
    .requiredOption("--plan <plan>", "plan name")
    .option("--monthly <n|none>", "reports per calendar month, or none", parse.quota)
    .option("--burst <n>", "reports per second", parse.positiveInt)
    .option("--json", "print JSON", false)
    .action(
      async (
        opts: {
          project: string;
          plan: string;
          monthly?: number | null;
          burst?: number;
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
