import { parseArgs } from "node:util";
import type { DataFormat } from "@clickhouse/client";
import { createClickHouse } from "../clickhouse/client.js";
import { migrate } from "../clickhouse/migrations.js";
import { cliConfig, UsageError } from "./context.js";

export const QUERY_HELP = `headroom query "SQL" [--format F]   (default format PrettyCompactMonoBlock)
headroom migrate`;

export async function migrateCommand(): Promise<void> {
  const config = cliConfig();
  const client = createClickHouse(config);
  try {
    const applied = await migrate(
      client,
      { db: config.CLICKHOUSE_DATABASE, retentionDays: config.RETENTION_DAYS },
      (msg) => process.stdout.write(`${msg}\n`),
    );
    if (applied.length === 0) process.stdout.write("schema is up to date\n");
  } finally {
    await client.close();
  }
}

export async function queryCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { format: { type: "string", default: "PrettyCompactMonoBlock" } },
  });
  const sql = positionals.join(" ").trim();
  if (!sql) throw new UsageError(QUERY_HELP);
  const config = cliConfig();
  const client = createClickHouse(config);
  try {
    const result = await client.exec({
      query: sql,
      clickhouse_settings: { default_format: values.format as DataFormat },
    });
    for await (const chunk of result.stream) process.stdout.write(chunk as Buffer);
  } finally {
    await client.close();
  }
}
