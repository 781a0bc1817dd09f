import type { ClickHouseClient } from "@clickhouse/client";
import { REPORT_COLUMNS, type ReportRow } from "../report/report-schema.js";

// Where report rows land: one JSONCompactEachRow insert per batch into `reports` (the rollups and
// the latest-limits table follow through materialized views).

export interface ReportSink {
  /** Retries of one batch pass the same token, so ClickHouse keeps only one copy. */
  insert(rows: ReportRow[], dedupToken: string): Promise<void>;
  /** Which of these report ids are already stored (for redelivered jobs). */
  existing(reportIds: string[]): Promise<Set<string>>;
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
          // A batch is one part: no async buffering between us and the acknowledgement.
          async_insert: 0,
        },
      });
    },

    async existing(reportIds) {
      if (reportIds.length === 0) return new Set();
      const rs = await client.query({
        query: `SELECT toString(report_id) AS id FROM ${db}.reports WHERE report_id IN {ids:Array(UUID)}`,
        query_params: { ids: reportIds },
        format: "JSONCompactEachRow",
      });
      const rows = await rs.json<[string]>();
      return new Set(rows.map((r) => r[0]));
    },
  };
}
