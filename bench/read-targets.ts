// What the read bench's readers ask. The dashboards model asks what the page does
// (src/page/client/main.ts): /headroom every 2 s; every 6 s, for the range it shows (by default
// the last 24 h to the next whole minute, computed per poll), /usage grouped by provider and
// model with no window (the API picks hour for 24 h), the alert events, the spend and the log's
// first page.
// Beside them, a few API clients poll the rolling last 24 h by minute (no from/to), the query
// the dashboards model asked until 2026-11-29. Targets travel as JSON to the readers' process,
// so a polled range is a query template, filled per poll by `targetUrl`.

export interface ReadTarget {
  name: string;
  /** Path without query string when `query` is given; with it otherwise. */
  path: string;
  /** How often a dashboard asks for it. */
  everyMs: number;
  /** The query, in the page's order; the values FROM and TO are the page's range at each poll. */
  query?: Array<[string, string]>;
  /** The range's span (PAGE_SPAN_MS when absent). */
  spanMs?: number;
  /** How many of the readers ask it (the first n); all when absent. */
  readers?: number;
  /** Sends back the last answer's ETag to the same URL (If-None-Match), as the page's browser does. */
  revalidate?: boolean;
}

export const FROM = "{from}";
export const TO = "{to}";

const MINUTE_MS = 60_000;
/** The page's ranges that end now (src/page/client/main.ts SPANS); 24h is its fallback. */
export const PAGE_SPANS_MS: Record<string, number> = {
  "1h": 3_600_000,
  "6h": 6 * 3_600_000,
  "24h": 24 * 3_600_000,
  "7d": 7 * 86_400_000,
  "30d": 30 * 86_400_000,
};
export const PAGE_SPAN_MS = 24 * 3_600_000;
const HEADROOM_EVERY_MS = 2_000;
const RANGE_EVERY_MS = 6_000;

/** The page's range at `nowMs`: `spanMs` ending at the next whole minute, as ISO text. */
export function pageRange(nowMs: number, spanMs = PAGE_SPAN_MS): { from: string; to: string } {
  const to = Math.ceil(nowMs / MINUTE_MS) * MINUTE_MS;
  return { from: new Date(to - spanMs).toISOString(), to: new Date(to).toISOString() };
}

/** The URL path and query a target asks at `nowMs`, encoded as the page's queryString does. */
export function targetUrl(target: ReadTarget, nowMs: number): string {
  if (target.query === undefined) return target.path;
  const range = pageRange(nowMs, target.spanMs);
  const params = new URLSearchParams();
  for (const [name, value] of target.query) {
    params.append(name, value === FROM ? range.from : value === TO ? range.to : value);
  }
  const s = params.toString();
  return s ? `${target.path}?${s}` : target.path;
}

const HEADROOM: ReadTarget = { name: "headroom", path: "/api/v1/headroom", everyMs: 2_000 };
const ROLLING_MINUTE = {
  name: "usage-rolling-minute",
  path: "/api/v1/usage?window=minute&group_by=provider,model",
  everyMs: RANGE_EVERY_MS,
};

/** Closed loops: /headroom and the rolling 24 h by minute, alternately (issue 19's load). */
export const CLOSED_TARGETS: ReadTarget[] = [HEADROOM, ROLLING_MINUTE];

/**
 * A page's polls (src/page/client/main.ts refreshHeadroom, refreshRange, refreshLog) for a range
 * of `spanMs` ending now, and the rolling minute query asked by the first `rollingReaders`
 * readers (0: none).
 */
export function dashboardTargets(rollingReaders: number, spanMs = PAGE_SPAN_MS): ReadTarget[] {
  const range = (name: string, path: string, query: Array<[string, string]>): ReadTarget => ({
    name,
    path,
    everyMs: RANGE_EVERY_MS,
    query,
    spanMs,
    revalidate: true,
  });
  return [
    { ...HEADROOM, everyMs: HEADROOM_EVERY_MS, revalidate: true },
    range("usage", "/api/v1/usage", [
      ["from", FROM],
      ["to", TO],
      ["group_by", "provider,model"],
    ]),
    range("alerts-events", "/api/v1/alerts/events", [
      ["from", FROM],
      ["to", TO],
      ["limit", "100"],
    ]),
    range("spend", "/api/v1/spend", [
      ["from", FROM],
      ["to", TO],
    ]),
    range("reports", "/api/v1/reports", [
      ["limit", "20"],
      ["from", FROM],
      ["to", TO],
    ]),
    ...(rollingReaders > 0 ? [{ ...ROLLING_MINUTE, readers: rollingReaders }] : []),
  ];
}
