import type { FastifyPluginAsync } from "fastify";
import type { BacklogGate } from "../backlog.js";

// GET /healthz: the process runs. GET /readyz: Redis answers and the backlog is under its bound,
// with each check named, so a load balancer stops sending reports that would get a 503.

export const healthRoutes: FastifyPluginAsync<{ backlog: BacklogGate }> = async (
  app,
  { backlog },
) => {
  app.get("/healthz", async () => ({ status: "ok" }));

  app.get("/readyz", async (_req, reply) => {
    const s = backlog.state();
    const problem = backlog.problem();
    reply.code(problem ? 503 : 200);
    return {
      status: problem ? "unavailable" : "ok",
      checks: {
        redis: { ok: s.redisOk },
        backlog: { ok: s.redisOk && !problem, jobs: s.backlogJobs, memory_ratio: s.memoryRatio },
      },
      ...(problem ? { reason: problem } : {}),
    };
  });
};
