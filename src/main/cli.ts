import { ConfigError } from "../config.js";
import { KeyStoreError } from "../keys/key-store.js";
import { migrateCommand, QUERY_HELP, queryCommand } from "../cli/clickhouse-commands.js";
import { UsageError } from "../cli/context.js";
import { DLQ_HELP, dlqCommand } from "../cli/dlq-command.js";
import { KEYS_HELP, keysCommand } from "../cli/keys-command.js";

const HELP = `headroom — ingestion service for AI-provider rate-limit reports

Usage:
${KEYS_HELP}
${DLQ_HELP}
${QUERY_HELP}
headroom stats [--project ID] [--since 24h] [--json]
headroom clickhouse serve [--path DIR] [--port N] [--host H]

Configuration comes from the environment (see README); with the local stack running
(npm start), its Redis and ClickHouse are used by default.`;

const [command, ...args] = process.argv.slice(2);

async function run(): Promise<void> {
  switch (command) {
    case "keys":
      return keysCommand(args);
    case "dlq":
      return dlqCommand(args);
    case "migrate":
      return migrateCommand();
    case "query":
      return queryCommand(args);
    case "stats":
      return (await import("../cli/stats-command.js")).statsCommand(args);
    case "clickhouse":
      if (args[0] !== "serve")
        throw new UsageError("headroom clickhouse serve [--path DIR] [--port N] [--host H]");
      return (await import("../local/clickhouse/serve.js")).serveClickHouse(args.slice(1));
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(`${HELP}\n`);
      return;
    default:
      throw new UsageError(`unknown command ${command}\n\n${HELP}`);
  }
}

try {
  await run();
} catch (err) {
  const known =
    err instanceof UsageError || err instanceof ConfigError || err instanceof KeyStoreError;
  process.stderr.write(
    `headroom: ${known ? (err as Error).message : String((err as Error)?.stack ?? err)}\n`,
  );
  process.exitCode = known ? 2 : 1;
}
