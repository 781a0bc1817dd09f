import type { z } from "zod";
import type { KeyLookup } from "../../keys/key-store.js";
import { WINDOW_LENGTHS } from "../../providers/window.js";
import { newestFirstPage } from "../cursor.js";
import { sharedIfEndsNow } from "../ends-now.js";
import { filterSql } from "../params.js";
import type { QueryCache } from "../query-cache.js";
import { num, type ReadStore } from "../read-store.js";
import type {
  alertEventItem,
  alertEventsQuery,
  alertEventsResponse,
} from "../schemas/alert-events.js";

// The events of GET /api/v1/alerts/events: SQL and row mapping, from `alert_events` FINAL (an
// event stored twice is listed once).

const EVENT_ID = /^evt_[0-9a-f]{32}$/;

export interface AlertEventsDeps {
  store: ReadStore;
  /** Pages of a range ending now, shared by what was asked (ends-now.ts). */
  answers?: QueryCache;
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
  return sharedIfEndsNow(deps.answers, project.projectId, "alerts/events", q, async (shared) => {
    const { items, next_cursor } = await newestFirstPage<EventRow>({
      store: deps.store,
      now: (deps.now ?? Date.now)(),
      q,
      what: "events",
      id: EVENT_ID,
      project: project.projectId,
      sql: (after) => eventsSql(deps.store.db, sql, after),
      params,
      uncached: shared,
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
  });
}
