// The read API as the page sees it: the shapes of the answers it reads (the fields the page uses,
// as /api/v1/openapi.json describes them) and one fetch that turns a refused key into an error
// the page can show. The headroom shapes live in headroom-types.ts, checked against the API's
// own schema.

export type {
  Figures,
  Headroom,
  MetricView,
  PoolView,
  SeriesView,
  Status,
  UnknownReason,
  WindowView,
} from "./headroom-types.js";

export interface UsagePoint {
  bucket: string;
  provider?: string;
  model?: string | null;
  reports: number;
  requests_remaining_min: number | null;
  tokens_remaining_min: number | null;
  requests_limit_max: number | null;
  tokens_limit_max: number | null;
  used_pct_max: number | null;
  /** Per dimension, the worst % used across the point's windows (what the provider stated). */
  used_pct_by_dimension?: Record<string, number>;
  cost: number;
}

export interface Usage {
  from: string;
  to: string;
  window: "minute" | "hour" | "day";
  points: UsagePoint[];
}

export interface Report {
  id: string;
  app: string;
  provider: string;
  model: string | null;
  timestamp: string;
  limits: { requests_remaining: number | null; tokens_remaining: number | null };
  credits: { request_cost: number | null } | null;
  /** The windows stored with the report: from its provider's headers, error body or limits. */
  windows: {
    dimension: string;
    window: string | null;
    limit: number | null;
    remaining: number | null;
    used_pct: number | null;
  }[];
  /** The provider's error in a line ("429 rate limited (RESOURCE_EXHAUSTED)"), when it sent one. */
  error: { summary: string; rate_limited: boolean } | null;
}

export interface AlertEvent {
  id: string;
  provider: string;
  model: string | null;
  app: string;
  metric: string;
  /** The window that moved: its dimension and stated length (null: not stated, or an old event). */
  dimension?: string;
  window?: string | null;
  level: "warning" | "critical" | "resolved";
  used_pct: number;
  at: string;
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface Spend {
  from: string;
  to: string;
  providers: {
    provider: string;
    cost: number;
    requests: number;
    /** Cost over the range ÷ its hours: an average, not the burn now. */
    burn_per_hour: number;
    credits_remaining: number | null;
    /** The credits' burn now, as /headroom's (the model of now), or null with its reason. */
    credits_burn_per_hour: number | null;
    credits_burn_unknown: string | null;
    hours_until_depleted: number | null;
    hours_until_depleted_unknown: string | null;
  }[];
}

/** The key was refused (401) or is not a read key (403): the page asks for another. */
export class KeyRefused extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export type Query = Record<string, string | string[] | undefined>;

export function queryString(q: Query): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(q)) {
    if (value === undefined || value === "") continue;
    for (const v of Array.isArray(value) ? value : [value]) params.append(name, v);
  }
  const s = params.toString();
  return s ? `?${s}` : "";
}

/** GET /api/v1/<path> with the key in the Authorization header (never in the URL). */
export async function getJson<T>(key: string, path: string, q: Query = {}): Promise<T> {
  const res = await fetch(`/api/v1/${path}${queryString(q)}`, {
    headers: { authorization: `Bearer ${key}`, accept: "application/json" },
    // Revalidated each time (If-None-Match): an unchanged /usage answer comes back as a 304.
    cache: "no-cache",
  });
  const body = (await res.json().catch(() => ({}))) as { error?: string; message?: string };
  if (res.status === 401 || res.status === 403) {
    throw new KeyRefused(body.error ?? String(res.status), body.message ?? res.statusText);
  }
  if (!res.ok) throw new Error(`${path}: ${res.status} ${body.error ?? ""} ${body.message ?? ""}`);
  return body as T;
}
