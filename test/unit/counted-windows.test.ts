import fc from "fast-check";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import {
  addCounts,
  countedUse,
  type HotCounts,
  pacificDayStart,
  periodEnd,
  periodStart,
  pruneCounts,
  type ResetKind,
  resetKindOf,
} from "../../src/alerts/counted-windows.js";
import { hotUpdates } from "../../src/headroom/hot-series.js";
import type { WindowLength } from "../../src/providers/window.js";
import { type ReportRow, toRecord, toRow } from "../../src/report/report-schema.js";

// Counted windows (issue 45): what reports that state no remaining say was used, in buckets of
// fixed periods, and a window's use at any moment. The property: for reports in any order, cut
// into batches in any way, batches delivered again (their token counts once) and reports sent
// again with their ids (the edge refuses a repeat, as modelled here), and moments on any side
// of the resets, every fixed window's use is exactly the reports of its period, and a rolling
// window's is a floor: never more than the reports inside it, and short of them by at most its
// oldest bucket.

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

describe("periods", () => {
  it("starts the Pacific day at midnight in Los Angeles, through both changes of the clock", () => {
    // PST (UTC-8) and PDT (UTC-7); 2026-03-08 has 23 hours, 2026-11-01 has 25.
    expect(pacificDayStart(Date.UTC(2026, 0, 15, 20))).toBe(Date.UTC(2026, 0, 15, 8));
    expect(pacificDayStart(Date.UTC(2026, 0, 15, 7, 59))).toBe(Date.UTC(2026, 0, 14, 8));
    expect(pacificDayStart(Date.UTC(2026, 6, 4, 7))).toBe(Date.UTC(2026, 6, 4, 7));
    expect(pacificDayStart(Date.UTC(2026, 2, 8, 20))).toBe(Date.UTC(2026, 2, 8, 8));
    expect(periodEnd("p", Date.UTC(2026, 2, 8, 8))).toBe(Date.UTC(2026, 2, 9, 7));
    expect(pacificDayStart(Date.UTC(2026, 10, 1, 20))).toBe(Date.UTC(2026, 10, 1, 7));
    expect(periodEnd("p", Date.UTC(2026, 10, 1, 7))).toBe(Date.UTC(2026, 10, 2, 8));
    // Just before and at midnight.
    expect(pacificDayStart(Date.UTC(2026, 10, 2, 7, 59, 59, 999))).toBe(Date.UTC(2026, 10, 1, 7));
    expect(pacificDayStart(Date.UTC(2026, 10, 2, 8))).toBe(Date.UTC(2026, 10, 2, 8));
  });

  it("ends a UTC month on the first of the next", () => {
    expect(periodStart("M", Date.UTC(2028, 1, 29, 23))).toBe(Date.UTC(2028, 1, 1));
    expect(periodEnd("M", Date.UTC(2028, 1, 1))).toBe(Date.UTC(2028, 2, 1));
    expect(periodEnd("M", Date.UTC(2026, 11, 1))).toBe(Date.UTC(2027, 0, 1));
  });

  it("says how each provider's windows reset when counted", () => {
    expect(resetKindOf("gemini", "1d")).toBe("pacific_day");
    expect(resetKindOf("vertex", "1d")).toBe("pacific_day");
    expect(resetKindOf("gemini", "1m")).toBe("utc_minute");
    expect(resetKindOf("bedrock", "1m")).toBe("utc_minute");
    expect(resetKindOf("bedrock", "1d")).toBe("utc_day");
    expect(resetKindOf("deepseek", "1h")).toBe("utc_hour");
    expect(resetKindOf("x", "1mo")).toBe("utc_month");
    expect(resetKindOf("x", "5h")).toBe("rolling");
    expect(resetKindOf("x", "7d")).toBe("rolling");
    expect(resetKindOf("x", "1s")).toBeNull();
    expect(resetKindOf("x", null)).toBeNull();
  });
});

interface Sent {
  id: string;
  t: number;
  input: number | null;
  output: number | null;
}

/** A Bedrock-like report: no limits, no headers, its usage. */
function rowOf(r: Sent): ReportRow {
  return toRow(
    toRecord(
      {
        provider: "bedrock",
        app: "chat",
        model: "claude-haiku",
        timestamp: r.t,
        limits: {
          requests_limit: null,
          requests_remaining: null,
          tokens_limit: null,
          tokens_remaining: null,
          reset_requests_ms: null,
          reset_tokens_ms: null,
        },
        credits: null,
        usage: { input_tokens: r.input, output_tokens: r.output, cached_tokens: null },
      },
      { reportId: r.id, projectId: "p", keyId: "k", receivedAt: r.t },
    ),
  );
}

const WINDOWS: [WindowLength, ResetKind][] = [
  ["1m", "utc_minute"],
  ["1h", "utc_hour"],
  ["1d", "utc_day"],
  ["1d", "pacific_day"],
  ["1mo", "utc_month"],
  ["5h", "rolling"],
  ["7d", "rolling"],
];
const FIXED: Partial<Record<ResetKind, "m" | "h" | "d" | "p" | "M">> = {
  utc_minute: "m",
  utc_hour: "h",
  utc_day: "d",
  pacific_day: "p",
  utc_month: "M",
};
const ROLLING: Partial<Record<WindowLength, { ms: number; bucket: number }>> = {
  "5h": { ms: 5 * HOUR, bucket: HOUR },
  "7d": { ms: 7 * DAY, bucket: DAY },
};

const usedBy = (dimension: string, r: Sent) =>
  dimension === "requests"
    ? 1
    : dimension === "input_tokens"
      ? (r.input ?? 0)
      : dimension === "output_tokens"
        ? (r.output ?? 0)
        : (r.input ?? 0) + (r.output ?? 0);

describe("counted windows", () => {
  it("count each report once, in any order and batches, resets passing: the reference model's use", () => {
    const report = fc.record({
      offset: fc.oneof(fc.integer({ min: 0, max: 10 * MIN }), fc.integer({ min: 0, max: 3 * DAY })),
      input: fc.option(fc.integer({ min: 0, max: 5_000 }), { freq: 4 }),
      output: fc.option(fc.integer({ min: 0, max: 500 }), { freq: 4 }),
    });
    fc.assert(
      fc.property(
        // Any moment of 2026 to 2030: DST changes, month ends and leap days come up.
        fc.integer({ min: Date.UTC(2026, 0, 1), max: Date.UTC(2030, 0, 1) }),
        fc.array(report, { minLength: 1, maxLength: 40 }),
        fc.array(fc.nat(), { minLength: 1, maxLength: 60 }),
        fc.array(fc.integer({ min: 0, max: 4 * DAY }), { minLength: 1, maxLength: 6 }),
        (base, drawn, plan, later) => {
          const sent: Sent[] = drawn.map((d, i) => ({
            id: uuidv7({ msecs: base + i }),
            t: base + d.offset,
            input: d.input,
            output: d.output,
          }));
          // The plan cuts the reports (a report sent again with its id among them) into batches,
          // and delivers some batches twice.
          const sends: Sent[] = plan.map((n) => sent[n % sent.length] as Sent);
          const batches: { token: string; rows: Sent[] }[] = [];
          for (let i = 0; i < sends.length; ) {
            const size = 1 + ((plan[i] ?? 0) % 7);
            batches.push({ token: `b${batches.length}`, rows: sends.slice(i, i + size) });
            i += size;
          }
          const deliveries = [...batches];
          for (const [i, n] of plan.entries())
            if (n % 5 === 0 && batches[i]) deliveries.push(batches[i]);

          // The pipeline: the edge takes an id once; the store adds a batch's counts once.
          const claimed = new Set<string>();
          const tokens = new Set<string>();
          const accepted: Sent[] = [];
          let store: HotCounts = {};
          let now = base;
          const check = (at: number) => {
            for (const [length, reset] of WINDOWS)
              for (const dimension of [
                "requests",
                "tokens",
                "input_tokens",
                "output_tokens",
              ] as const) {
                const got = countedUse(store, dimension, length, reset, at).used;
                const fixed = FIXED[reset];
                if (fixed) {
                  const start = periodStart(fixed, at);
                  const want = accepted
                    .filter((r) => periodStart(fixed, r.t) === start)
                    .reduce((n, r) => n + usedBy(dimension, r), 0);
                  expect(got, `${dimension} ${length} ${reset} at ${at}`).toBe(want);
                } else {
                  const { ms, bucket } = ROLLING[length] as { ms: number; bucket: number };
                  const inside = (from: number) =>
                    accepted
                      .filter((r) => r.t > from && r.t <= at)
                      .reduce((n, r) => n + usedBy(dimension, r), 0);
                  expect(got).toBeLessThanOrEqual(inside(at - ms));
                  expect(got).toBeGreaterThanOrEqual(inside(at - ms + bucket));
                }
              }
          };
          // Delivered in an order of their own.
          const order = deliveries
            .map((_, i) => i)
            .sort((a, b) => (plan[a] ?? 0) - (plan[b] ?? 0) || a - b);
          const sentIn = new Map<string, Sent[]>();
          for (const { token, rows } of batches) {
            // What the edge let through, as the batch was first sent.
            const taken = rows.filter((r) => !claimed.has(r.id) && claimed.add(r.id));
            sentIn.set(token, taken);
          }
          for (const i of order) {
            const { token } = deliveries[i] as { token: string };
            const rows = sentIn.get(token) ?? [];
            if (rows.length === 0) continue;
            now = Math.max(now, ...rows.map((r) => r.t));
            const gathered = hotUpdates(rows.map(rowOf)).get("p");
            const k = [...(gathered?.values() ?? [])][0]?.k ?? {};
            if (!tokens.has(token)) {
              tokens.add(token);
              accepted.push(...rows);
              store = pruneCounts(addCounts(store, k), now);
            } else store = pruneCounts(store, now);
            check(now);
          }
          for (const gap of later) check(now + gap);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("bounds", () => {
  it("keeps the 16 nearest buckets of a kind ahead of the server's clock, none further", () => {
    const now = Date.UTC(2030, 0, 2, 12, 0, 30);
    // A report dated each of the next 100 minutes (timestamps may be up to a day ahead).
    const counts: HotCounts = {};
    const past = Date.UTC(2030, 0, 2, 12);
    counts[`m:${past}`] = [1, 0, 0, 0, past];
    for (let i = 1; i <= 100; i++) {
      const start = past + i * MIN;
      counts[`m:${start}`] = [1, 0, 0, 0, start];
    }
    const kept = Object.keys(pruneCounts(counts, now));
    expect(kept).toHaveLength(1 + 16);
    expect(kept).toContain(`m:${past}`);
    expect(kept).toContain(`m:${past + 16 * MIN}`);
    expect(kept).not.toContain(`m:${past + 17 * MIN}`);
  });
});
