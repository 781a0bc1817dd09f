import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { loadConfig } from "../../src/config.js";
import { buildApp } from "../../src/edge/app.js";
import type { BacklogGate } from "../../src/edge/backlog.js";
import type { Limits } from "../../src/edge/limits.js";
import { createEdgeMetrics } from "../../src/edge/metrics.js";
import type { ReportIds } from "../../src/edge/report-ids.js";
import { HttpError, unavailable } from "../../src/http/errors.js";
import type { LookupKey } from "../../src/keys/key-cache.js";
import { generateKey } from "../../src/keys/key-format.js";
import type { KeyLookup } from "../../src/keys/key-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { createAuthFailureLimits } from "../../src/limits/auth-failures.js";
import { EnqueueError } from "../../src/queue/enqueue-error.js";
import type { Enqueuer } from "../../src/queue/enqueuer.js";
import type { IdJobs } from "../../src/queue/id-jobs.js";
import { fromRow, type ReportRecord, type ReportRow } from "../../src/report/report-schema.js";

// The edge built by buildApp on fakes of its injected dependencies, for route tests in the unit
// project: a key store of two keys (report, read), limits a test can close, a backlog gate a
// test can fill, an enqueuer that keeps the rows it is given (or fails), and ids in memory.

export const EDGE_PROJECT = "prj_edge";

export const edgeKeys = { report: generateKey(), read: generateKey("read") };

const lookups: Record<string, KeyLookup> = {
  [edgeKeys.report]: {
    keyId: "key_w",
    projectId: EDGE_PROJECT,
    scope: "report",
    plan: "free",
    overrides: {},
  },
  [edgeKeys.read]: {
    keyId: "key_r",
    projectId: EDGE_PROJECT,
    scope: "read",
    plan: "free",
    overrides: {},
  },
};

export interface FakeEdge {
  app: FastifyInstance;
  /** Every report the enqueuer took, in order. */
  queued: ReportRecord[];
  post(
    url: string,
    body: unknown,
    opts?: { key?: string | null; contentType?: string },
  ): Promise<LightMyRequestResponse>;
  /** The burst limit refuses from now on. */
  closeBurst(): void;
  /** The backlog is over its bound from now on. */
  fillBacklog(): void;
  /** Redis refuses every job from now on. */
  failEnqueue(): void;
}

export function fakeEdge(env: Record<string, string> = {}): FakeEdge {
  const queued: ReportRecord[] = [];
  const take = (rows: ReportRow[]) => queued.push(...rows.map(fromRow));
  let burstClosed = false;
  let backlogFull = false;
  let enqueueFails = false;
  const auth = createAuthFailureLimits({ points: 1_000, windowS: 60 });
  const burstRefusal = () =>
    new HttpError("rate_limited", "burst limit exceeded", {
      body: { limit: 1, remaining: 0, reset_at: new Date(0).toISOString() },
    });
  const limits: Limits = {
    ...auth,
    authFailureClients: auth.clients,
    consumeBurst: () => (burstClosed ? Promise.reject(burstRefusal()) : null),
    consumeBurstMany: async (_lookup, n) =>
      burstClosed ? { granted: 0, refusal: burstRefusal() } : { granted: n, refusal: null },
    consumeQuota: () => async () => {},
    consumeQuotaMany: async (_lookup, n) => ({
      granted: n,
      refund: async () => {},
      refusal: null,
    }),
    close: async () => {},
  };
  const refusal = () =>
    backlogFull ? { reason: "backlog" as const, message: "the backlog is over its bound" } : null;
  const backlog: BacklogGate = {
    start: async () => {},
    stop: async () => {},
    state: () => ({
      redisOk: true,
      backlogJobs: backlogFull ? 1_000_000 : 0,
      memoryRatio: null,
      replicasShort: [],
      checkedAt: 0,
    }),
    memoryGateOn: () => false,
    maxJobs: 1_000_000,
    problem: () => refusal()?.message ?? null,
    refusal,
    check() {
      const r = refusal();
      if (r) throw unavailable(undefined, r.reason);
    },
  };
  const failure = () => (enqueueFails ? new EnqueueError("redis refused the job") : undefined);
  const enqueuer: Enqueuer = {
    add(row, done) {
      const err = failure();
      if (!err) take([row]);
      queueMicrotask(() => done(err));
    },
    async enqueue(row) {
      const err = failure();
      if (err) throw err;
      take([row]);
    },
    async enqueueMany(rows) {
      const err = failure();
      if (!err) take(rows);
      return rows.map(() => err);
    },
    async writeJob(_shard, _token, rows) {
      const err = failure();
      if (err) throw err;
      take(rows);
    },
    drain: async () => {},
  };
  // Ids in memory: an id is new until the job holding it is stored.
  const stored = new Set<string>();
  const reportIds: ReportIds = {
    claim: async (project, ids) =>
      ids.map((id) => ({ state: stored.has(`${project} ${id}`) ? "stored" : "new" })),
    resolve: async () => true,
    settle: async (project, ids, _place, outcome) => {
      if (outcome === "stored") for (const id of ids) stored.add(`${project} ${id}`);
    },
  };
  let tokens = 0;
  const idJobs: IdJobs = {
    place: () => ({ shard: 0, prefix: "{fake}", token: `job-${++tokens}` }),
    written: async () => true,
  };
  const lookupKey: LookupKey = async (key) => lookups[key] ?? null;
  const app = buildApp({
    config: loadConfig(env),
    logger: createLogger("silent", "test"),
    lookupKey,
    limits,
    backlog,
    enqueuer,
    reportIds,
    idJobs,
    metrics: createEdgeMetrics(),
  });
  return {
    app,
    queued,
    post: (url, body, opts = {}) => {
      const key = opts.key === undefined ? edgeKeys.report : opts.key;
      return app.inject({
        method: "POST",
        url,
        headers: {
          "content-type": opts.contentType ?? "application/json",
          ...(key === null ? {} : { authorization: `Bearer ${key}` }),
        },
        payload: typeof body === "string" ? body : JSON.stringify(body),
      });
    },
    closeBurst: () => {
      burstClosed = true;
    },
    fillBacklog: () => {
      backlogFull = true;
    },
    failEnqueue: () => {
      enqueueFails = true;
    },
  };
}
