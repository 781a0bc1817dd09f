import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CREDIT_FIELDS,
  fromRow,
  LIMIT_FIELDS,
  REPORT_COLUMNS,
  type ReportBody,
  type ReportRow,
  receivedAtMsOf,
  reportBodySchema,
  reportIdOf,
  reportRecordSchema,
  toRecord,
  toRow,
  USAGE_COLUMNS,
} from "../../src/report/report-schema.js";
import { reports } from "../helpers/report-arbitraries.js";

// The stored record (a parsed body plus the server's fields) and the positional row of a queue
// job that is inserted into ClickHouse.

const body = (extra: Record<string, unknown> = {}) =>
  reportBodySchema.parse({ provider: "openai", limits: {}, ...extra });

describe("record and row", () => {
  const server = {
    reportId: "01900000-0000-7000-8000-000000000001",
    projectId: "prj_1",
    keyId: "key_1",
    receivedAt: Date.UTC(2024, 4, 1, 10, 0, 5, 250),
  };

  const full = body({
    app: "billing",
    model: "gpt-4o",
    timestamp: "2024-05-01T10:00:00.123Z",
    limits: { requests_limit: 500, tokens_remaining: 149_000 },
    credits: { credits_limit: 100, credits_remaining: 99.9999997, request_cost: 1e-7 },
  });

  it("adds the server's fields and keeps the body's", () => {
    expect(toRecord(full, server)).toMatchObject({
      report_id: server.reportId,
      project_id: "prj_1",
      key_id: "key_1",
      app: "billing",
      provider: "openai",
      model: "gpt-4o",
      timestamp: "2024-05-01T10:00:00.123Z",
      received_at: "2024-05-01T10:00:05.250Z",
      requests_limit: 500,
      tokens_remaining: 149_000,
      request_cost: 1e-7,
    });
  });

  it("uses the receive time when the body has no timestamp", () => {
    expect(toRecord(body(), server).timestamp).toBe("2024-05-01T10:00:05.250Z");
    expect(toRecord(body({ timestamp: null }), server).timestamp).toBe("2024-05-01T10:00:05.250Z");
  });

  it("stores a credits object whose fields are all null as no credits; keeps a partial one", () => {
    const allNull = { credits_limit: null, credits_remaining: null, request_cost: null };
    expect(toRecord(body({ credits: allNull }), server)).toMatchObject(allNull);
    expect(toRecord(body({ credits: { request_cost: 0 } }), server)).toMatchObject({
      ...allNull,
      request_cost: 0,
    });
  });

  it("writes ClickHouse text for times and exact decimal text for credits", () => {
    const row = toRow(toRecord(full, server));
    expect(row).toContain("2024-05-01 10:00:00.123");
    expect(row).toContain("2024-05-01 10:00:05.250");
    expect(row).toContain("0.000000100000");
    expect(row).toContain("99.999999700000");
  });

  it("round-trips a record through its row", () => {
    for (const b of [full, body()]) {
      const record = toRecord(b, server);
      expect(fromRow(toRow(record))).toEqual(record);
    }
  });

  it("a record (as `dlq replay --rows` reads it) holds any id the edge takes from a client", () => {
    // A client's id need not be RFC 9562's: its version and variant bits are not checked.
    const reportId = "12345678-1234-1234-1234-123456789abc";
    const record = fromRow(toRow(toRecord(full, { ...server, reportId })));
    expect(reportRecordSchema.parse(record)).toEqual(record);
    expect(reportRecordSchema.safeParse({ ...record, report_id: "not-a-uuid" }).success).toBe(
      false,
    );
  });

  it("reads the report id and receive time of a row", () => {
    const row = toRow(toRecord(full, server));
    expect(reportIdOf(row)).toBe(server.reportId);
    expect(receivedAtMsOf(row)).toBe(server.receivedAt);
    expect(receivedAtMsOf(["not", "a", "report"])).toBeNaN();
  });

  it("shows a time that is not ClickHouse text as it is", () => {
    const row = toRow(toRecord(full, server));
    const odd = row.map((v) => (v === "2024-05-01 10:00:00.123" ? "garbage" : v));
    expect(fromRow(odd).timestamp).toBe("garbage");
  });
});

/** The record and row by plain loops over the schema's lists: the reference of the compiled ones. */
function referenceRow(body: ReportBody, server: Parameters<typeof toRecord>[1]): ReportRow {
  const iso = (ms: number) => new Date(ms).toISOString();
  const chTime = (text: string) => `${text.slice(0, 10)} ${text.slice(11, 23)}`;
  const credits = body.credits;
  const hasCredits = credits != null && CREDIT_FIELDS.some((k) => credits[k] !== null);
  const record: Record<string, unknown> = {
    report_id: server.reportId,
    project_id: server.projectId,
    key_id: server.keyId,
    app: body.app,
    provider: body.provider,
    model: body.model,
    timestamp: chTime(iso(body.timestamp ?? server.receivedAt)),
    received_at: chTime(iso(server.receivedAt)),
  };
  for (const k of LIMIT_FIELDS) record[k] = body.limits[k];
  for (const k of CREDIT_FIELDS) {
    const v = hasCredits ? credits[k] : null;
    record[k] = v === null ? null : v.toFixed(12);
  }
  // headers and error: null for a body without them (what the client library sends).
  return REPORT_COLUMNS.map((c) => (record[c] ?? null) as string | number | null);
}

describe("the compiled record and row", () => {
  it("equal plain loops over the schema's lists, for any body the schema takes", () => {
    fc.assert(
      fc.property(
        reports,
        fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.now() + 86_400_000 }),
        fc.uuid({ version: 7 }),
        (value, receivedAt, reportId) => {
          const parsed = reportBodySchema.safeParse(value);
          fc.pre(parsed.success);
          const body = parsed.data as ReportBody;
          const server = { reportId, projectId: "prj_1", keyId: "key_1", receivedAt };
          const row = toRow(toRecord(body, server));
          expect(row).toEqual(referenceRow(body, server));
          // A record without what the provider said, a pool or a usage has every other column, in order.
          const optional = ["headers", "error", "account", "pool", ...USAGE_COLUMNS];
          expect(Object.keys(toRecord(body, server))).toEqual(
            REPORT_COLUMNS.filter((c) => !optional.includes(c) || (c === "pool" && body.pool)),
          );
        },
      ),
      { numRuns: 1_000 },
    );
  });
});
