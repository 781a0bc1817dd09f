import type { z } from "zod";
import type { KeyLookup } from "../../keys/key-store.js";
import { storedWindowSource } from "../../providers/parsers/registry.js";
import { summariseError } from "../../report/error-summary.js";
import { UUID_TEXT } from "../../report/report-id.js";
import { newestFirstPage } from "../cursor.js";
import { sharedIfEndsNow } from "../ends-now.js";
import { filterSql } from "../params.js";
import type { QueryCache } from "../query-cache.js";
import { num, type ReadStore } from "../read-store.js";
import type { reportItem, reportsQuery, reportsResponse } from "../schemas/reports.js";

// The reports of GET /api/v1/reports: SQL and row mapping. Read from `reports` FINAL, as
// reports_v does: a redelivered report is listed once.

export interface ReportsDeps {
  store: ReadStore;
  /** Pages of a range ending now, shared by what was asked (ends-now.ts). */
  answers?: QueryCache;
  now?: () => number;
}

interface ReportRow {
  id: string;
  app: string;
  provider: string;
  model: string;
  t: string;
  r: string;
  requests_limit: string | null;
  requests_remaining: string | null;
  tokens_limit: string | null;
  tokens_remaining: string | null;
  reset_requests_ms: string | null;
  reset_tokens_ms: string | null;
  credits_limit: number | null;
  credits_remaining: number | null;
  request_cost: number | null;
  w_dimension: string[];
  w_window: (string | null)[];
  w_limit: (number | null)[];
  w_remaining: (number | null)[];
  w_resets_at: (string | null)[];
  w_parser: string;
  error: string | null;
}

function reportsSql(db: string, filters: string, after: boolean) {
  return `SELECT toString(report_id) AS id, app, provider, model,
    toUnixTimestamp64Milli(timestamp) AS t, toUnixTimestamp64Milli(received_at) AS r,
    requests_limit, requests_remaining, tokens_limit, tokens_remaining,
    reset_requests_ms, reset_tokens_ms,
    toFloat64(credits_limit) AS credits_limit, toFloat64(credits_remaining) AS credits_remaining,
    toFloat64(request_cost) AS request_cost,
    \`windows.dimension\` AS w_dimension, \`windows.window\` AS w_window,
    \`windows.limit\` AS w_limit, \`windows.remaining\` AS w_remaining,
    arrayMap(t -> toString(toUnixTimestamp64Milli(t)), \`windows.resets_at\`) AS w_resets_at,
    windows_parser AS w_parser,
    error
  FROM ${db}.reports FINAL
  WHERE project_id = {project:String}
    AND timestamp >= {from:DateTime64(3)} AND timestamp < {to:DateTime64(3)}${filters}${
      after ? " AND (timestamp, toString(report_id)) < ({ct:DateTime64(3)}, {cid:String})" : ""
    }
  ORDER BY timestamp DESC, id DESC
  LIMIT {limit:UInt32}`;
}

function item(r: ReportRow): z.infer<typeof reportItem> {
  const credits = {
    credits_limit: num(r.credits_limit),
    credits_remaining: num(r.credits_remaining),
    request_cost: num(r.request_cost),
  };
  return {
    id: r.id,
    app: r.app,
    provider: r.provider,
    model: r.model === "" ? null : r.model,
    timestamp: new Date(Number(r.t)).toISOString(),
    received_at: new Date(Number(r.r)).toISOString(),
    limits: {
      requests_limit: num(r.requests_limit),
      requests_remaining: num(r.requests_remaining),
      tokens_limit: num(r.tokens_limit),
      tokens_remaining: num(r.tokens_remaining),
      reset_requests_ms: num(r.reset_requests_ms),
      reset_tokens_ms: num(r.reset_tokens_ms),
    },
    // Stored as "no credits" when all three are null (docs/report-api.md).
    credits: Object.values(credits).every((v) => v === null) ? null : credits,
    windows: windowsOf(r),
    error: r.error === null ? null : summariseError(parsed(r.error)),
  };
}

const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

const round2 = (n: number) => Math.round(n * 100) / 100;

/**
 * The windows stored with the report (derived from its headers, error body or contract fields:
 * src/providers/), as /headroom names them, with the % used each stated at the report's time.
 */
function windowsOf(r: ReportRow): z.infer<typeof reportItem>["windows"] {
  return r.w_dimension.map((dimension, i) => {
    const limit = num(r.w_limit[i] ?? null);
    const remaining = num(r.w_remaining[i] ?? null);
    const resets = r.w_resets_at[i] ?? null;
    return {
      dimension,
      window: r.w_window[i] ?? null,
      source: storedWindowSource(r.w_parser, { limit }),
      limit,
      remaining,
      used_pct:
        limit !== null && limit > 0 && remaining !== null
          ? round2(Math.min(100, Math.max(0, ((limit - remaining) / limit) * 100)))
          : null,
      resets_at: resets === null ? null : new Date(Number(resets)).toISOString(),
    };
  });
}

export async function readReports(
  deps: ReportsDeps,
  project: KeyLookup,
  q: z.output<typeof reportsQuery>,
): Promise<z.infer<typeof reportsResponse>> {
  const { sql, params } = filterSql(q);
  return sharedIfEndsNow(deps.answers, project.projectId, "reports", q, async (shared) => {
    const { items, next_cursor } = await newestFirstPage<ReportRow>({
      store: deps.store,
      now: (deps.now ?? Date.now)(),
      q,
      what: "reports",
      id: UUID_TEXT,
      project: project.projectId,
      sql: (after) => reportsSql(deps.store.db, sql, after),
      params,
      uncached: shared,
    });
    return { items: items.map(item), next_cursor };
  });
}
