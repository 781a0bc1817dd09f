import type { FastifyPluginAsync } from "fastify";
import type { z } from "zod";
import type { HotSeries } from "../../headroom/hot-series.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { type EncodedAnswer, encodeJson, sendEncoded } from "../encoded-answer.js";
import { parseQuery } from "../params.js";
import { type Given, type HeadroomDeps, orUnavailable, readHeadroom } from "../queries/headroom.js";
import { headroomQuery } from "../schemas/headroom.js";

// GET /api/v1/headroom: the latest figures of each series (latest_limits), with the burn rate
// over its recent reports and a status by the project's alert rules. Read from the hot copy the
// ingest workers keep in Redis (hot-store.ts); a project whose copy is not whole (Redis lost it)
// is refilled from ClickHouse first, once per process at a time. Each series lists its windows
// (dimension and length), each through the model of now; its status is its worst window's.
// The reading (hot copy, refill, ClickHouse's SQL and rows): queries/headroom.ts.

interface HeldAnswer {
  version: string | null;
  /** Its JSON bytes, ETag and compressed copies, each made once however many readers ask. */
  encoded: EncodedAnswer;
  /**
   * The hot copy it was made from (when the route read it), with the length of its text: the
   * next answer of the same version, made once this one is too old, needs no copy from Redis.
   */
  copy?: { series: Map<string, HotSeries>; bytes: number };
}

/**
 * What a held answer keeps alive: its bytes, room for a compressed copy in each encoding (JSON
 * compresses 20-40 times; counted as its full length, an upper bound), and its copy's objects
 * (about four times its text).
 */
export const heldAnswerBytes = (a: unknown) =>
  3 * (a as HeldAnswer).encoded.identity.length + 4 * ((a as HeldAnswer).copy?.bytes ?? 0);

export const headroomRoutes: FastifyPluginAsync<HeadroomDeps> = async (app, deps) => {
  const { answers, hot } = deps;
  const answerOf = async (
    project: KeyLookup,
    filters: z.infer<typeof headroomQuery>,
    version: string | null,
    given?: Given,
    copy?: HeldAnswer["copy"],
  ): Promise<HeldAnswer> => ({
    version,
    // Kept as bytes: serialised once per shared answer, compressed once per encoding asked (an
    // 83 KB answer of 50 series is 2-4 KB in br: a page polling every 2 s on a phone).
    encoded: encodeJson(
      Buffer.from(JSON.stringify(await readHeadroom(deps, project, filters, given))),
      project.projectId,
    ),
    ...(copy ? { copy } : {}),
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
        return sendEncoded(req, reply, held.encoded);
      }
      deps.versions?.track(project.projectId);
      // The rules are asked for at the same time (a cache, in Redis every ALERTS_RULES_TTL_MS).
      const rules = deps.rulesFor(project.projectId);
      rules.catch(() => {}); // awaited below when an answer is made; unused otherwise
      // An answer too old to serve still names the copy it was made from: the snapshot sends
      // the copy only when its version moved on (a round trip still confirms it every TTL).
      const last = held ?? answers.last<HeldAnswer>(project.projectId, key);
      const known = held ? held.version : last?.copy ? last.version : null;
      const snap = await orUnavailable(hot.snapshot(project.projectId, known));
      const { version } = snap;
      deps.versions?.read(project.projectId, version);
      const copy =
        snap.series !== undefined
          ? { series: snap.series, bytes: snap.bytes ?? 0 }
          : version !== null && last?.version === version
            ? last.copy
            : undefined;
      answer =
        version === null
          ? await answerOf(project, filters, null, { rules })
          : await answers.get(
              project.projectId,
              key,
              () => answerOf(project, filters, version, { series: copy?.series, rules }, copy),
              (h) => h.version === version,
            );
    }
    return sendEncoded(req, reply, answer.encoded);
  });
};
