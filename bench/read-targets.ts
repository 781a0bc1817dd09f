// What the read bench's readers ask. The dashboards model asks what the page does
// (src/page/client/main.ts): /headroom every 2 s; every 6 s, for the range it shows (by default
// `last=24h`: the same query at every poll, however the clock turns), /usage grouped by provider
// and model with no window (the API picks hour for 24 h), the alert events, the spend and the
// log's first page. Until 2026-11-29 (issue 48) the page asked `from`/`to` ending at the next
// whole minute, moved per poll.
// Beside them, a few API clients poll the rolling last 24 h by minute (no from/to), the query
// the dashboards model asked until 2026-11-29.

export interface ReadTarget {
  name: string;
  /** Path without query string when `query` is given; with it otherwise. */
  path: string;
  /** How often a dashboard asks for it. */
  everyMs: number;
  /** The query, in the page's order. */
  query?: Array<[string, string]>;
  /** How many of the readers ask it (the first n); all when absent. */
  readers?: number;
  /** Sends back the last answer's ETag to the same URL (If-None-Match), as the page's browser does. */
  revalidate?: boolean;
}

/** The page's ranges that end now (src/page/client/main.ts SPANS), asked as `last`. */
export const PAGE_RANGES = ["1h", "6h", "24h", "7d", "30d"] as const;
export const PAGE_RANGE = "24h";
const HEADROOM_EVERY_MS = 2_000;
const RANGE_EVERY_MS = 6_000;

/** The URL path and query a target asks, encoded as the page's queryString does. */
export function targetUrl(target: ReadTarget): string {
  if (target.query === undefined) return target.path;
  const s = new URLSearchParams(target.query).toString();
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
 * A page's polls (src/page/client/main.ts refreshHeadroom, refreshRange, refreshLog) for the
 * range `last` (one of PAGE_RANGES), and the rolling minute query asked by the first
 * `rollingReaders` readers (0: none).
 */
export function dashboardTargets(rollingReaders: number, last = PAGE_RANGE): ReadTarget[] {
  const range = (name: string, path: string, query: Array<[string, string]>): ReadTarget => ({
    name,
    path,
    everyMs: RANGE_EVERY_MS,
    query,
    revalidate: true,
  });
  return [
    { ...HEADROOM, everyMs: HEADROOM_EVERY_MS, revalidate: true },
    range("usage", "/api/v1/usage", [
      ["last", last],
      ["group_by", "provider,model"],
    ]),
    range("alerts-events", "/api/v1/alerts/events", [
      ["last", last],
      ["limit", "100"],
    ]),
    range("spend", "/api/v1/spend", [["last", last]]),
    range("reports", "/api/v1/reports", [
      ["limit", "20"],
      ["last", last],
    ]),
    ...(rollingReaders > 0 ? [{ ...ROLLING_MINUTE, readers: rollingReaders }] : []),
  ];
}
