import type { ReportRow } from "../report/report-schema.js";

// A batch's rows are turned into JSON once, as one array: the manifest stores these bytes and the
// insert sends them (report-sink.ts). One JSON.stringify of the whole array costs a fraction of
// one per row joined into a body.

/** The rows as a JSON array, UTF-8. */
export const rowsJson = (rows: readonly ReportRow[]): Buffer => Buffer.from(JSON.stringify(rows));
