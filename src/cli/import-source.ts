import { createHash } from "node:crypto";
import { UUID_TEXT } from "../report/report-id.js";

// What `headroom import` reads: Headroom's own reports (a JSON array, or NDJSON: one a line), or
// the original service's export, rows of its RateLimitReport model (delimiterapp/delimiter,
// apps/web/prisma/schema.prisma: id (a cuid), projectId, app, provider, model, timestamp,
// limits (the client's limits object, as sent), createdAt). Every report leaves with an id, so
// that a retry, or the same file imported again, is stored once: its own UUID, one derived from
// the export row's id, or, for a report without one, one derived from its content and its place
// in the file (the same file, or one with more lines appended, gives every report the id it had;
// two identical reports in a file stay two). Nothing is kept per report: a file of any size.

export type Report = Record<string, unknown> & { id: string };

/** A UUID fixed by a foreign id: the same row imported twice gets the same one. */
export function uuidFromForeignId(source: string, id: string): string {
  const h = createHash("sha256").update(`${source}:${id}`).digest();
  h[6] = ((h[6] as number) & 0x0f) | 0x80; // version 8: custom
  h[8] = ((h[8] as number) & 0x3f) | 0x80; // RFC 9562 variant
  const hex = h.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A row of the original service's export: its own id, project and creation time. */
const isDelimiterRow = (row: Record<string, unknown>) =>
  typeof row.id === "string" && !UUID_TEXT.test(row.id) && "projectId" in row && "createdAt" in row;

/**
 * The file's item at `index` (0-based, bad items counted) → a report to send, with an id, or
 * null when it is no object.
 */
export function toReport(value: unknown, index: number): Report | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  const row = value as Record<string, unknown>;
  if (isDelimiterRow(row)) {
    // The original stored `timestamp ?? now` at receipt; its createdAt is that receipt.
    const { id, projectId: _p, createdAt, ...report } = row;
    return {
      ...report,
      timestamp: report.timestamp ?? createdAt,
      id: uuidFromForeignId("delimiter", id as string),
    };
  }
  if (typeof row.id === "string" && UUID_TEXT.test(row.id)) return { ...row, id: row.id };
  return { ...row, id: uuidFromForeignId("headroom", `${index}:${JSON.stringify(row)}`) };
}
