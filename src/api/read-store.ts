import type { ClickHouseClient } from "@clickhouse/client";
import { isClickHouseError } from "../clickhouse/classify-error.js";
import { unavailable } from "../http/errors.js";
import type { QueryCache } from "./query-cache.js";

// The read API's only way to ClickHouse: parameterised queries (`{name:Type}`), each shared by
// identical requests through the cache. ClickHouse unreachable is a 503; ClickHouse refusing a
// query is our bug, and stays a 500.

export interface ReadStore {
  /** The database every table name is qualified with. */
  db: string;
  /** Shared through the cache, unless `uncached`: for a caller that caches what it makes of them. */
  rows<T>(query: string, params: QueryParams, uncached?: boolean): Promise<T[]>;
}

/** Every read query is one project's: its answers are charged to that project in the cache. */
export type QueryParams = { project: string } & Record<string, unknown>;

/**
 * What a cached row array keeps alive: the parsed rows, and what callers hang on them by
 * identity (usage.ts's shaped answer and its encoded, compressed bytes), about four times the
 * rows' JSON.
 */
export const rowsBytes = (rows: unknown) => 4 * Buffer.byteLength(JSON.stringify(rows));

export function createReadStore(opts: {
  clickhouse: ClickHouseClient;
  db: string;
  cache: QueryCache;
}): ReadStore {
  const { clickhouse, cache } = opts;
  return {
    db: opts.db,
    rows<T>(query: string, params: QueryParams, uncached = false): Promise<T[]> {
      const run = async () => {
        try {
          const rs = await clickhouse.query({
            query,
            query_params: params,
            format: "JSONEachRow",
          });
          return await rs.json<T>();
        } catch (err) {
          if (isClickHouseError(err)) throw err;
          const e = unavailable("the store cannot answer right now");
          e.cause = err;
          throw e;
        }
      };
      return uncached ? run() : cache.get(params.project, JSON.stringify([query, params]), run);
    },
  };
}

/** A ClickHouse number (Int64 arrives as text, Decimal as a number), or null. */
export const num = (v: unknown): number | null =>
  v === null || v === undefined || v === "" ? null : Number(v);
