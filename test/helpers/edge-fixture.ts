import { randomBytes } from "node:crypto";
import type { HTTPMethods, LightMyRequestResponse } from "fastify";
import type { Logger } from "pino";
import { afterAll, beforeAll, inject } from "vitest";
import { CLIENT_LIMITS } from "../../fixtures/sample-reports.js";
import type { Plan } from "../../src/config.js";
import { loadConfig } from "../../src/config.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { jobRows } from "../../src/queue/job-rows.js";
import type { ReportsQueue } from "../../src/queue/reports-queue.js";
import { fromRow, type ReportRecord } from "../../src/report/report-schema.js";

// One edge per test file (or per concern), on the harness's Redis unless told otherwise, with
// queue names and project ids of its own so that files running side by side never meet.

export const uniqueId = (): string => randomBytes(5).toString("hex");

export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** What the real client sends for one AI-provider call. */
export function clientReport(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    app: "chat-api",
    provider: "openai",
    model: "gpt-4o-mini",
    timestamp: new Date().toISOString(),
    limits: { ...CLIENT_LIMITS },
    credits: null,
    ...overrides,
  };
}

/** A sample of an edge's /metrics: `name` with exactly these `labels` (`{…}` or none); 0 when absent. */
export async function edgeMetric(edge: Edge, name: string, labels = ""): Promise<number> {
  const text = (await edge.app.inject({ url: "/metrics" })).body;
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

export interface TestKey {
  key: string;
  keyId: string;
  projectId: string;
}

export interface PostOptions {
  key?: string;
  /** A header set to undefined is not sent. */
  headers?: Record<string, string | undefined>;
  url?: string;
  method?: HTTPMethods;
  remoteAddress?: string;
}

/** Queued reports, decoded: every row of every waiting job. */
export async function queuedRecords(queue: ReportsQueue): Promise<ReportRecord[]> {
  const jobs = await queue.getJobs(["wait", "prioritized", "delayed"]);
  return jobs.filter((j) => j !== undefined).flatMap((j) => jobRows(j.data).map(fromRow));
}

export async function startEdge(
  opts: { env?: Record<string, string>; logger?: Logger; redisUrl?: string } = {},
) {
  const tag = uniqueId();
  const config = loadConfig({
    REDIS_URL: opts.redisUrl ?? inject("redisUrl"),
    QUEUE_PREFIX: `{t-${tag}}`,
    QUEUE_NAME: `reports-${tag}`,
    ...opts.env,
  });
  const edge: Edge = await createEdge(config, opts.logger ?? createLogger("silent", "test"));
  let projects = 0;
  let closed = false;

  return {
    edge,
    config,

    /** A key for a new project of its own; plan overrides are set before the first use. */
    async createKey(plan?: { plan: string; overrides?: Partial<Plan> }): Promise<TestKey> {
      projects += 1;
      const projectId = `t-${tag}-${projects}`;
      const created = await edge.keyStore.create(projectId, {
        plan: plan?.plan,
        defaultPlan: "unlimited",
      });
      if (plan?.overrides) await edge.keyStore.setPlan(projectId, plan.plan, plan.overrides);
      return { key: created.key, keyId: created.keyId, projectId };
    },

    /** POST /api/report (by default) as the client does; objects are sent as JSON. */
    post(body: unknown, o: PostOptions = {}): Promise<LightMyRequestResponse> {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`;
      for (const [name, value] of Object.entries(o.headers ?? {})) {
        if (value === undefined) delete headers[name];
        else headers[name] = value;
      }
      const payload =
        typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body);
      return edge.app.inject({
        method: o.method ?? "POST",
        url: o.url ?? "/api/report",
        headers,
        ...(body === undefined ? {} : { payload }),
        ...(o.remoteAddress ? { remoteAddress: o.remoteAddress } : {}),
      });
    },

    records: () => queuedRecords(edge.queue),

    async close() {
      if (closed) return;
      closed = true;
      // Leave nothing behind when REDIS_URL points at a shared server.
      await edge.queue.obliterate({ force: true }).catch(() => {});
      await edge.close();
    },
  };
}

export type EdgeFixture = Awaited<ReturnType<typeof startEdge>>;

/**
 * One edge and one key shared by the tests of the file (or describe block) this is called in:
 * started before them and closed after them; `set` receives them. Tests that need a project, a
 * plan or a key of their own still make one.
 */
export function sharedEdge(
  set: (shared: { fx: EdgeFixture; k: TestKey }) => void,
  opts?: Parameters<typeof startEdge>[0],
): void {
  let fx: EdgeFixture | undefined;
  beforeAll(async () => {
    fx = await startEdge(opts);
    set({ fx, k: await fx.createKey() });
  });
  afterAll(async () => {
    await fx?.close();
  });
}
