import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { BacklogGate } from "../backlog.js";

// GET /healthz: the process runs. GET /readyz: Redis answers and the backlog is under its bound,
// so a load balancer stops sending reports that would get a 503. Anyone gets ok or not; the
// figures (backlog size, Redis memory, the reason) only a caller `details` lets through: the
// metrics token's holder, or anyone on the internal metrics listener.

export interface HealthDeps {
  backlog: BacklogGate;
  details: (req: FastifyRequest) => boolean;
}

export const healthRoutes: FastifyPluginAsync<HealthDeps> = async (app, { backlog, details }) => {
  app.get("/healthz", async () => ({ status: "ok" }));

  app.get("/readyz", async (req, reply) => {
    const problem = backlog.problem();
    reply.code(problem ? 503 : 200);
    const status = problem ? "unavailable" : "ok";
    if (!details(req)) return { status };
    const s = backlog.state();
    return {
      status: !problem && s.replicasShort.length > 0 ? "degraded" : status,
      checks: {
        redis: { ok: s.redisOk },
        backlog: { ok: s.redisOk && !problem, jobs: s.backlogJobs, memory_ratio: s.memoryRatio },
        // Off when disabled, or when Redis has no maxmemory to compare with.
        memory_gate: { on: backlog.memoryGateOn() },
        // Not a reason to refuse (other shards take reports): their batches wait for a replica.
        replicas: { ok: s.replicasShort.length === 0, short: s.replicasShort },
      },
      ...(problem ? { reason: problem } : {}),
    };
  });
};
