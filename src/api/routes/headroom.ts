import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import { BURN_UNITS, UNKNOWN_REASONS } from "../../alerts/now-model.js";
import { STATUSES } from "../../headroom/headroom-view.js";
import { POOL_KINDS } from "../../headroom/pool-view.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { WINDOW_LENGTHS } from "../../providers/window.js";
import { parseQuery, seriesFilters, single } from "../params.js";
import { type Given, type HeadroomDeps, orUnavailable, readHeadroom } from "../queries/headroom.js";

// GET /api/v1/headroom: the latest figures of each series (latest_limits), with the burn rate
// over its recent reports and a status by the project's alert rules. Read from the hot copy the
// ingest workers keep in Redis (hot-store.ts); a project whose copy is not whole (Redis lost it)
// is refilled from ClickHouse first, once per process at a time. Each series lists its windows
// (dimension and length), each through the model of now; its status is its worst window's.
// The reading (hot copy, refill, ClickHouse's SQL and rows): queries/headroom.ts.

export const headroomQuery = z.strictObject({
  ...seriesFilters,
  /** `pool`: per pool only; `app`: per app only (series); neither: both. */
  group: single(z.enum(["pool", "app"])).optional(),
});

const unknown = z.enum(UNKNOWN_REASONS).nullable();
const metricView = z.object({
  limit: z.number().nullable(),
  remaining: z.number().nullable(),
  used_pct: z.number().nullable(),
  resets_at: z.string().nullable(),
  resets_in_s: z.number().nullable(),
  resets_unknown: unknown,
  reset_since_report: z.boolean(),
  burn_per_s: z.number().nullable(),
  burn: z.number().nullable(),
  burn_unit: z.enum(Object.values(BURN_UNITS)),
  burn_unknown: unknown,
  exhausted_at: z.string().nullable(),
  exhaustion_eta_s: z.number().nullable(),
  exhaustion_unknown: unknown,
});

/** One of a series' windows: which one, when it was last reported, and the metric view's fields. */
export const windowView = metricView.extend({
  dimension: z.string(),
  window: z.enum(WINDOW_LENGTHS).nullable(),
  reported_at: z.string(),
});

const seriesFigures = z.object({
  provider: z.string(),
  model: z.string().nullable(),
  status: z.enum(STATUSES),
  last_seen: z.string(),
  reported_at: z.string().nullable(),
  credits_reported_at: z.string().nullable(),
  requests: metricView,
  tokens: metricView,
  credits: metricView,
  windows: z.array(windowView),
});

/** One pool (docs/pools.md): the newest figures of any member per window, all members' burn. */
export const poolAnswer = seriesFigures.extend({
  pool: z.string(),
  kind: z.enum(POOL_KINDS),
  label: z.string().nullable(),
  members: z.array(
    z.object({ app: z.string(), key_id: z.string().nullable(), last_seen: z.string() }),
  ),
});

export const headroomResponse = z.object({
  at: z.string(),
  /** Per app (absent with group=pool). */
  series: z.array(seriesFigures.extend({ app: z.string() })).optional(),
  /** Per pool (absent with group=app). */
  pools: z.array(poolAnswer).optional(),
});

export type HeadroomResponse = z.infer<typeof headroomResponse>;

interface HeldAnswer {
  version: string | null;
  body: Buffer;
}

/** What a held answer keeps alive: its bytes. */
export const heldAnswerBytes = (a: unknown) => (a as HeldAnswer).body.length;

export const headroomRoutes: FastifyPluginAsync<HeadroomDeps> = async (app, deps) => {
  const { answers, hot } = deps;
  const answerOf = async (
    project: KeyLookup,
    filters: z.infer<typeof headroomQuery>,
    version: string | null,
    given?: Given,
  ): Promise<HeldAnswer> => ({
    version,
    // Kept as bytes: serialised and encoded once per shared answer.
    body: Buffer.from(JSON.stringify(await readHeadroom(deps, project, filters, given))),
  });

  app.get("/api/v1/headroom", async (req, reply) => {
    const filters = parseQuery(headroomQuery, req.query);
    const project = req.project as KeyLookup;
    let answer: HeldAnswer;
    if (!answers || !hot) {
      answer = await answerOf(project, filters, null);
    } else {
      // An answer is kept only while it is current: a write moves the version on, so sharing
      // never delays a report by more than a read. The version pushed by the workers says so
      // without a round trip; else the hot copy's version, with the copy itself unless the
      // answer held was made from it, in one.
      const key = JSON.stringify(["headroom", filters]);
      const held = answers.peek<HeldAnswer>(project.projectId, key);
      const pushed = deps.versions?.current(project.projectId);
      if (held !== undefined && pushed !== undefined && held.version === pushed) {
        return reply.type("application/json; charset=utf-8").send(held.body);
      }
      deps.versions?.track(project.projectId);
      // The rules are asked for at the same time (a cache, in Redis every ALERTS_RULES_TTL_MS).
      const rules = deps.rulesFor(project.projectId);
      rules.catch(() => {}); // awaited below when an answer is made; unused otherwise
      const snap = await orUnavailable(hot.snapshot(project.projectId, held?.version ?? null));
      const { version, series } = snap;
      deps.versions?.read(project.projectId, version);
      answer =
        version === null
          ? await answerOf(project, filters, null, { rules })
          : await answers.get(
              project.projectId,
              key,
              () => answerOf(project, filters, version, { series, rules }),
              (h) => h.version === version,
            );
    }
    return reply.type("application/json; charset=utf-8").send(answer.body);
  });
};
