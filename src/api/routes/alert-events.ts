import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import { ruleMetricSchema } from "../../alerts/rule.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { WINDOW_LENGTHS } from "../../providers/window.js";
import { cursorParam, newestFirstPage } from "../cursor.js";
import { filterSql, limit, parseQuery, seriesFilters, time } from "../params.js";
import { num, type ReadStore } from "../read-store.js";

// GET /api/v1/alerts/events: the project's alert events, newest first (time, then id), a page
// at a time, from `alert_events` FINAL (an event stored twice is listed once).

export const LEVELS = ["warning", "critical", "resolved"] as const;

export const alertEventsQuery = z.strictObject({
  from: time.optional(),
  to: time.optional(),
  limit: limit(100, 50),
  cursor: cursorParam.optional(),
  level: z
    .union([z.string(), z.array(z.string())])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .pipe(z.array(z.enum(LEVELS, { error: "expected warning, critical or resolved" })).max(3))
    .optional(),
  provider: seriesFilters.provider,
});

const EVENT_ID = /^evt_[0-9a-f]{32}$/;

export const alertEventItem = z.object({
  id: z.string(),
  rule_id: z.string(),
  provider: z.string(),
  model: z.string().nullable(),
  app: z.string(),
  metric: ruleMetricSchema.meta({
    description:
      "The rule's metric: the dimension it watches (requests, tokens, credits, input_tokens, output_tokens, or another a provider names).",
  }),
  dimension: z.string().meta({
    description:
      "The dimension of the window that moved (the rule's metric); an event stored before windows had dimensions gives its metric.",
  }),
  window: z.enum(WINDOW_LENGTHS).nullable().meta({
    description:
      "The length of the window that moved, or null when the provider did not state it (and for events stored before windows).",
  }),
  level: z.enum(LEVELS),
  used_pct: z.number(),
  limit: z.number(),
  remaining: z.number(),
  reset_ms: z.number().nullable(),
  burn_per_s: z.number().nullable(),
  exhaustion_eta_s: z.number().nullable(),
  warn_pct: z.number(),
  critical_pct: z.number(),
  report_id: z.uuid(),
  at: z.string(),
});

export const alertEventsResponse = z.object({
  items: z.array(alertEventItem),
  next_cursor: z.string().nullable(),
});

export interface AlertEventsDeps {
  store: ReadStore;
  now?: () => number;
}

type EventRow = Omit<z.infer<typeof alertEventItem>, "reset_ms" | "at" | "model" | "window"> & {
  model: string;
  window: string | null;
  reset_ms: string | null;
  t: string;
};

function eventsSql(db: string, filters: string, after: boolean) {
  return `SELECT event_id AS id, rule_id, provider, model, app, metric, dimension, \`window\`,
    toString(level) AS level,
    used_pct, \`limit\`, remaining, reset_ms, burn_per_s, exhaustion_eta_s, warn_pct, critical_pct,
    toString(report_id) AS report_id, toUnixTimestamp64Milli(at) AS t
  FROM ${db}.alert_events FINAL
  WHERE project_id = {project:String}
    AND at >= {from:DateTime64(3)} AND at < {to:DateTime64(3)}${filters}${
      after ? " AND (at, event_id) < ({ct:DateTime64(3)}, {cid:String})" : ""
    }
  ORDER BY at DESC, event_id DESC
  LIMIT {limit:UInt32}`;
}

/** A stored window length, or null (events before windows; a length this release does not know). */
const windowLength = (w: string | null) =>
  (WINDOW_LENGTHS as readonly string[]).includes(w ?? "")
    ? (w as (typeof WINDOW_LENGTHS)[number])
    : null;

export async function readAlertEvents(
  deps: AlertEventsDeps,
  project: KeyLookup,
  q: z.output<typeof alertEventsQuery>,
): Promise<z.infer<typeof alertEventsResponse>> {
  let { sql, params } = filterSql({ provider: q.provider });
  if (q.level) {
    sql += " AND toString(level) IN {levels:Array(String)}";
    params = { ...params, levels: q.level };
  }
  const { items, next_cursor } = await newestFirstPage<EventRow>({
    store: deps.store,
    now: (deps.now ?? Date.now)(),
    q,
    what: "events",
    id: EVENT_ID,
    project: project.projectId,
    sql: (after) => eventsSql(deps.store.db, sql, after),
    params,
  });
  return {
    items: items.map(({ t, ...r }) => ({
      ...r,
      model: r.model === "" ? null : r.model,
      window: windowLength(r.window),
      reset_ms: num(r.reset_ms),
      at: new Date(Number(t)).toISOString(),
    })),
    next_cursor,
  };
}

export const alertEventsRoutes: FastifyPluginAsync<AlertEventsDeps> = async (app, deps) => {
  app.get("/api/v1/alerts/events", async (req) => {
    const q = parseQuery(alertEventsQuery, req.query);
    return readAlertEvents(deps, req.project as KeyLookup, q);
  });
};
