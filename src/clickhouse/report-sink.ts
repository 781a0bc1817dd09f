import type { ClickHouseClient } from "@clickhouse/client";
import { REPORT_COLUMNS, type ReportRow } from "../report/report-schema.js";

// Where report rows land: one JSONCompactEachRow insert per batch into `reports` (the rollups and
// the latest-limits table follow through materialized views).

export interface ReportSink {
  /** Every insert of one batch passes the same rows and token, so ClickHouse keeps one copy. */
  insert(rows: ReportRow[], dedupToken: string): Promise<void>;
}

const COLUMNS = REPORT_COLUMNS as [string, ...string[]];

export function createReportSink(client: ClickHouseClient, db: string): ReportSink {
  return {
    async insert(rows, dedupToken) {
      await client.insert({
        table: `${db}.reports`,
        columns: COLUMNS,
        values: rows,
        format: "JSONCompactEachRow",
        clickhouse_settings: {
          insert_deduplication_token: dedupToken,
          insert_deduplicate: 1,
          // The tables the materialized views write to drop the repeat too, so a re-inserted
          // batch is counted once in every rollup.
          deduplicate_blocks_in_dependent_materialized_views: 1,
          // A batch is one part: no async buffering between us and the acknowledgement.
          async_insert: 0,
        },
      });
    },
  };
}
