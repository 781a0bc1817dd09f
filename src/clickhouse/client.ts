import { createRequire } from "node:module";
import {
  type ClickHouseClient,
  type ClickHouseClientConfigOptions,
  ClickHouseLogLevel,
  createClient,
} from "@clickhouse/client";
import type { Config } from "../config.js";

// The ClickHouse client for a process: over HTTP when CLICKHOUSE_URL is set (a server, a
// cluster, or `headroom clickhouse serve`), else the embedded engine in this process through
// chdb's Connection for @clickhouse/client — the same client API either way. Callers always
// qualify table names with the database, so the client keeps the server's default database:
// that works before `migrate` created ours, and the in-process connection ignores it anyway.

export type ClickHouseConfig = Pick<
  Config,
  | "CLICKHOUSE_URL"
  | "CLICKHOUSE_USER"
  | "CLICKHOUSE_PASSWORD"
  | "CLICKHOUSE_DATABASE"
  | "CLICKHOUSE_PATH"
  | "CLICKHOUSE_REQUEST_TIMEOUT_MS"
>;

/**
 * Clients over the in-process engine: chdb's Connection turns an insert's body into text, which
 * binary data does not survive, so they insert as JSON (report-sink.ts).
 */
const IN_PROCESS = new WeakSet<ClickHouseClient>();

/** Whether an insert through `client` may send binary data (RowBinary). */
export const takesBinaryInserts = (client: ClickHouseClient): boolean => !IN_PROCESS.has(client);

export function createClickHouse(cfg: ClickHouseConfig): ClickHouseClient {
  if (cfg.CLICKHOUSE_URL) {
    return createClient({
      url: cfg.CLICKHOUSE_URL,
      username: cfg.CLICKHOUSE_USER,
      password: cfg.CLICKHOUSE_PASSWORD,
      request_timeout: cfg.CLICKHOUSE_REQUEST_TIMEOUT_MS,
      // Batches are built in memory and sent on a local network: compression costs more CPU
      // than it saves.
      compression: { request: false, response: false },
      keep_alive: { enabled: true },
      // Long parameter lists (report ids of a redelivered batch) go in the body, not the URL.
      use_multipart_params_auto: true,
      // Failures surface as errors to our callers, which log them once, in our own format.
      log: { level: ClickHouseLogLevel.OFF },
    });
  }
  // One embedded engine per process: only one client of this kind may exist in a process.
  // chdb 3.4.0 types its Connection against @clickhouse/client-common 1.23.0, which
  // @clickhouse/client 1.23.1 re-bundles with a slightly different settings type; the runtime
  // contract is the same, so the type is bridged here.
  // chdb is an optional dependency (left out of the container image): load it only here.
  const { createChdbConnection } = createRequire(import.meta.url)(
    "chdb/connection",
  ) as typeof import("chdb/connection");
  const connection = createChdbConnection({ path: cfg.CLICKHOUSE_PATH }) as unknown as NonNullable<
    ClickHouseClientConfigOptions["connection"]
  >;
  const client = createClient({ connection, log: { level: ClickHouseLogLevel.OFF } });
  IN_PROCESS.add(client);
  return client;
}
