import type { ClickHouseClient, DataFormat } from "@clickhouse/client";
import { createClickHouse } from "../clickhouse/client.js";
import { migrate, migrationContext } from "../clickhouse/migrations.js";
import { rederiveWindows } from "../clickhouse/rederive.js";
import type { Config } from "../config.js";
import { parseSince } from "./arg-parsers.js";
import { cliConfig } from "./context.js";

// `headroom migrate` and `headroom query`.

export async function migrateCommand(): Promise<void> {
  const config = cliConfig();
  const client = createClickHouse(config);
  try {
    const applied = await migrate(client, migrationContext(config), (msg) =>
      process.stdout.write(`${msg}\n`),
    );
    if (applied.length === 0) process.stdout.write("schema is up to date\n");
  } finally {
    await client.close();
  }
}

/**
 * Per-query options that run a query in Headroom's database, as `clickhouse-client --database`
 * does. The client has no default database (migrate creates it), so it is named per request:
 * over HTTP in the X-ClickHouse-Database header; the in-process engine has no such header but
 * keeps one session for this process, so a USE there lasts for the command's queries.
 */
export async function inDatabase(
  client: ClickHouseClient,
  config: Pick<Config, "CLICKHOUSE_URL" | "CLICKHOUSE_DATABASE">,
): Promise<{ http_headers?: Record<string, string> }> {
  if (config.CLICKHOUSE_URL) {
    return { http_headers: { "X-ClickHouse-Database": config.CLICKHOUSE_DATABASE } };
  }
  await client.command({ query: `USE \`${config.CLICKHOUSE_DATABASE}\`` });
  return {};
}

/**
 * ClickHouse's `readonly` for `headroom query`: 2 reads and sets the query's own settings (the
 * output format) but refuses writes and DDL, and cannot be lifted from within the query.
 */
const READ_ONLY = "2";

export async function queryCommand(
  sql: string,
  opts: { format: string; write?: boolean },
): Promise<void> {
  const config = cliConfig();
  const client = createClickHouse(config);
  try {
    const result = await client.exec({
      query: sql,
      clickhouse_settings: {
        ...(opts.write ? {} : { readonly: READ_ONLY }),
        default_format: opts.format as DataFormat,
        // Pretty formats colour their output for a terminal only, as clickhouse-client does.
        output_format_pretty_color: process.stdout.isTTY ? 1 : 0,
        // A wide row stays a row in the format asked for: no fallback to Vertical.
        output_format_pretty_fallback_to_vertical: 0,
      },
      ...(await inDatabase(client, config)),
    });
    for await (const chunk of result.stream) process.stdout.write(chunk as Buffer);
  } finally {
    await client.close();
  }
}

/** `headroom rederive-windows`: rederive.ts does the work. */
export async function rederiveCommand(opts: {
  project?: string;
  since?: string;
  parser?: string;
  dryRun: boolean;
  json: boolean;
}): Promise<void> {
  const config = cliConfig();
  const client = createClickHouse(config);
  try {
    const result = await rederiveWindows(client, migrationContext(config), {
      project: opts.project,
      sinceMs: opts.since === undefined ? undefined : Date.now() - parseSince(opts.since) * 1000,
      parser: opts.parser,
      dryRun: opts.dryRun,
    });
    process.stdout.write(
      opts.json
        ? `${JSON.stringify(result)}\n`
        : `${result.read} reports read, ${result.changed} with new windows${opts.dryRun ? " (dry run: none rewritten)" : ` rewritten in ${result.mutations} mutation(s)`}\n`,
    );
  } finally {
    await client.close();
  }
}
