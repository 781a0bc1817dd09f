import type { Command } from "commander";
import type { DeclaredLimit, DeclaredPool } from "../providers/declared-limit.js";
import { limitFlag, poolFlag } from "./declaration-flags.js";
import type { Source } from "./declarations-command.js";
import { UsageError } from "./errors.js";

// `headroom limits` and `headroom pools`: the commands, their options and help. Their code (and
// its clients) is loaded only when one runs, as for every command of program.ts.

const LIMITS_EXAMPLES = `
Examples:
  headroom limits set --project acme --limit bedrock/anthropic.claude-3-haiku:requests:1m=60
  headroom limits set --project acme --limit openai/gpt-4o#openai-prod:tokens:1m=30000 \\
      --limit deepseek/deepseek-chat:requests:1d=10000
  headroom limits set --project acme --file limits.json   # {"limits": [...]}, as list --json prints
  headroom limits set --project acme --none               # no declared limits
  headroom limits list --project acme [--json]
A limit is provider/model[#pool]:dimension:window=limit: dimension requests, tokens, input_tokens
or output_tokens; window 1s, 10s, 1m, 1h, 5h, 1d, 7d or 1mo. \`set\` replaces the whole set.`;

const POOLS_EXAMPLES = `
Examples:
  headroom pools set --project acme --pool openai:openai-prod=chat,agent --pool groq:groq-prod=rag
  headroom pools set --project acme --file pools.json     # {"pools": [...]}, as list --json prints
  headroom pools set --project acme --none
  headroom pools list --project acme [--json]
Reports of a listed app and provider that name no account and no pool draw on the pool, as if
their client had sent "pool": "<label>" (docs/pools.md). \`set\` replaces the whole set.`;

interface SetOptions<T> {
  project: string;
  file?: string;
  items?: T[];
  none: boolean;
  json: boolean;
}

/** Exactly one of --file, the repeated flag, or --none. */
function sourceOf<T>(command: string, flag: string, o: SetOptions<T>): Source<T> {
  const given = [o.file !== undefined, o.items !== undefined, o.none].filter(Boolean).length;
  if (given !== 1) {
    throw new UsageError(`${command}: give --file, one or more ${flag}, or --none (one of them)`);
  }
  if (o.file !== undefined) return { file: o.file };
  return o.items ? { items: o.items } : { none: true };
}

export function addDeclarations(program: Command): void {
  const run = async () => import("./declarations-command.js");

  const limits = program
    .command("limits")
    .description("limits a project declares for providers that state none (Bedrock, DeepSeek, …)")
    .addHelpText("after", LIMITS_EXAMPLES);
  limits
    .command("set")
    .description("replace the project's declared limits (at most 200)")
    .requiredOption("--project <id>", "project id")
    .option(
      "--limit <spec>",
      "provider/model[#pool]:dimension:window=limit (repeatable)",
      limitFlag,
    )
    .option("--file <file>", "a JSON file of limits, or - for stdin")
    .option("--none", "declare no limits", false)
    .option("--json", "print JSON", false)
    .action(async (o: Omit<SetOptions<DeclaredLimit>, "items"> & { limit?: DeclaredLimit[] }) =>
      (await run()).limitsSet(
        o.project,
        sourceOf("limits set", "--limit", { ...o, items: o.limit }),
        o,
      ),
    );
  limits
    .command("list")
    .description("the project's declared limits")
    .requiredOption("--project <id>", "project id")
    .option("--json", "print JSON", false)
    .action(async (o: { project: string; json: boolean }) =>
      (await run()).limitsList(o.project, o),
    );

  const pools = program
    .command("pools")
    .description("pools a project declares: the apps that share a provider's limit")
    .addHelpText("after", POOLS_EXAMPLES);
  pools
    .command("set")
    .description("replace the project's declared pools (at most 100, 1,000 apps in all)")
    .requiredOption("--project <id>", "project id")
    .option("--pool <spec>", "provider:label=app,app… (repeatable)", poolFlag)
    .option("--file <file>", "a JSON file of pools, or - for stdin")
    .option("--none", "declare no pools", false)
    .option("--json", "print JSON", false)
    .action(async (o: Omit<SetOptions<DeclaredPool>, "items"> & { pool?: DeclaredPool[] }) =>
      (await run()).poolsSet(
        o.project,
        sourceOf("pools set", "--pool", { ...o, items: o.pool }),
        o,
      ),
    );
  pools
    .command("list")
    .description("the project's declared pools")
    .requiredOption("--project <id>", "project id")
    .option("--json", "print JSON", false)
    .action(async (o: { project: string; json: boolean }) => (await run()).poolsList(o.project, o));
}
