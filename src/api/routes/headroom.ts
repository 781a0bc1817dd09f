import type { FastifyPluginAsync } from "fastify";
import type { z } from "zod";
import type { KeyLookup } from "../../keys/key-store.js";
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
