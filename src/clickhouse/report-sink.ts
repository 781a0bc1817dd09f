import { Readable } from "node:stream";
import type { ClickHouseClient, ClickHouseSettings } from "@clickhouse/client";
import { UUID_TEXT } from "../report/report-id.js";
import type { ReportRow } from "../report/report-schema.js";
import { ROW_SHAPES } from "../report/row-shapes.js";
import { takesBinaryInserts } from "./client.js";
import { type Derive, WINDOW_COLUMNS, windowCellsOf } from "./report-windows.js";
import { reportRowBinary } from "./row-binary.js";

// Where report rows land: one insert per batch into `reports` (the rollups and the latest-limits
// table follow through materialized views), in RowBinary (row-binary.ts), which ClickHouse reads
// without parsing text. Each row goes with its windows, derived here from the row as it is
// inserted (report-windows.ts): every insert of a batch derives the same windows from the same
// rows and encodes them to the same bytes, and the batch's token drops a repeat in any case.
// A batch with a value RowBinary would not store as JSON does goes as JSONCompactEachRow, as all
// batches did before: ClickHouse stores it, or refuses it for the worker to split, as it did.

export interface ReportSink {
  /**
   * Every insert of one batch passes the same rows and token, so ClickHouse keeps one copy.
   * `json` (the batch manifest's rowsJson) is not needed: the rows are sent with their windows.
   */
  insert(rows: ReportRow[], dedupToken: string, json?: Buffer): Promise<void>;
  /** Which of these rows' report ids `reports` holds already (a replayed job's check). */
  stored(rows: ReportRow[]): Promise<Set<string>>;
}

/**
 * On a cluster (CLICKHOUSE_CLUSTER) `reports` and `alert_events` are Distributed tables, and an
 * insert into them must stay exact when a batch is inserted again.
 *
 * In the foreground (distributed_foreground_insert) the insert returns once every shard stored its
 * rows. The block is split by the sharding key, cityHash64 of the row's id, and each shard gets
 * its rows as one insert carrying this query's settings, the deduplication token unchanged
 * (ClickHouse's DistributedSink; seen on the embedded engine in
 * test/integration/clickhouse-cluster.test.ts). A batch sent again splits into the same
 * per-shard blocks, so each shard's replicated table drops its repeat against its own
 * deduplication log (`{shard}` in its Keeper path), and so do the materialized views on it; a
 * shard that failed the first time stores its rows now.
 *
 * In the background (the default) the insert is acknowledged once the rows are queued on the
 * receiving host's disk, before any shard has them, and batched sends
 * (distributed_background_insert_batch) put several queued blocks into one insert under the
 * first one's settings and token. Neither fits "complete a job only after ClickHouse holds its
 * rows", so the sinks always insert in the foreground.
 */
export function distributedInsertSettings(cluster: string | undefined): ClickHouseSettings {
  return cluster ? { distributed_foreground_insert: 1 } : {};
}

/**
 * The settings of every exact insert (reports, alert events): one deduplication token per batch,
 * honoured by the tables the materialized views write to, no async buffering, and no cap on the
 * partitions one insert may touch. Rollups are partitioned by month of the client's timestamp,
 * which the edge bounds by the retention; a cap would turn a batch that spans more months than
 * it into a refusal that no retry can pass (TOO_MANY_PARTS, a code that also means "merges are
 * behind", so it cannot be classified as the data's fault).
 */
export function exactInsertSettings(
  dedupToken: string,
  cluster: string | undefined,
): ClickHouseSettings {
  return {
    insert_deduplication_token: dedupToken,
    insert_deduplicate: 1,
    deduplicate_blocks_in_dependent_materialized_views: 1,
    async_insert: 0,
    max_partitions_per_insert_block: "0",
    ...distributedInsertSettings(cluster),
  };
}

export function createReportSink(
  client: ClickHouseClient,
  db: string,
  cluster?: string,
  /** The rows' columns, in order: the current row shape's. */
  columns: readonly string[] = ROW_SHAPES.columns,
  /** How windows are derived (the providers' parsers); a test may give another. */
  derive?: Derive,
): ReportSink {
  const projectIndex = columns.indexOf("project_id");
  const idIndex = columns.indexOf("report_id");
  const insertInto = `INSERT INTO ${db}.reports (${[...columns, ...WINDOW_COLUMNS].join(", ")})`;
  const windowCells = windowCellsOf(columns, derive);
  const encode = takesBinaryInserts(client) ? reportRowBinary(columns) : undefined;
  return {
    async insert(rows, dedupToken) {
      if (rows.length === 0) return;
      const binary = encode?.(rows, windowCells);
      let body: Buffer;
      if (binary) body = binary;
      else {
        // Each row with its windows' cells after it, one JSON array of them all; sent without
        // its brackets: JSONCompactEachRow reads rows separated by commas as well as by newlines.
        const json = Buffer.from(
          JSON.stringify(rows.map((row) => (row as unknown[]).concat(windowCells(row)))),
        );
        body = json.subarray(1, json.length - 1);
      }
      const result = await client.exec({
        query: `${insertInto} FORMAT ${binary ? "RowBinary" : "JSONCompactEachRow"}`,
        values: Readable.from([body], { objectMode: false }),
        clickhouse_settings: exactInsertSettings(dedupToken, cluster),
      });
      // Nothing to read, but the connection goes back to the pool only once the answer is read.
      for await (const _ of result.stream);
    },

    async stored(rows) {
      // An id that is not a UUID (a row ClickHouse refused) cannot be stored.
      const ids = [...new Set(rows.map((r) => String(r[idIndex])))].filter((id) =>
        UUID_TEXT.test(id),
      );
      if (ids.length === 0) return new Set();
      const projects = [...new Set(rows.map((r) => String(r[projectIndex])))];
      const rs = await client.query({
        // The project narrows the search to the sort key's prefix; the id's bloom filter does
        // the rest.
        query: `SELECT DISTINCT toString(report_id) FROM ${db}.reports
          WHERE project_id IN {projects:Array(String)} AND report_id IN {ids:Array(UUID)}`,
        query_params: { projects, ids },
        format: "JSONCompactEachRow",
      });
      return new Set((await rs.json<[string]>()).map(([id]) => id));
    },
  };
}
