import type { LightMyRequestResponse } from "fastify";
import type { Logger } from "pino";
import { expect } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import type { Scope } from "../../src/keys/key-format.js";
import { createLogger } from "../../src/lib/logger.js";
import type { IngestWorker, IngestWorkerDeps } from "../../src/worker/create-ingest-worker.js";
import { uniqueId } from "./edge-fixture.js";
import { eventually } from "./eventually.js";
import { type Pipeline, startIngestWorker, startPipeline } from "./pipeline.js";

// The read side's test stack: a pipeline of its own (embedded ClickHouse server, names on the
// shared test Redis), the real edge and worker storing what is POSTed, and the read API over
// the same stores. Reports go in through the edge; figures come out through the API.

export const ENDPOINTS = [
  "/api/v1/headroom",
  "/api/v1/usage",
  "/api/v1/reports",
  "/api/v1/alerts/events",
  "/api/v1/spend",
] as const;

export interface ProjectKeys {
  project: string;
  report: string;
  read: string;
}

export async function startReadStack(
  env: Record<string, string> = {},
  /** What the ingest worker is given beyond the pipeline's (e.g. a test's deriveWindows). */
  opts: { worker?: Partial<IngestWorkerDeps>; logger?: Logger } = {},
) {
  const logger = opts.logger ?? createLogger("silent", "test");
  // READ_CACHE_TTL_MS=0 and READ_HEADROOM_TTL_MS=0 by default: each request asks ClickHouse or
  // the hot copy (the caches are tested apart).
  const p: Pipeline = await startPipeline({
    READ_CACHE_TTL_MS: "0",
    READ_HEADROOM_TTL_MS: "0",
    ...env,
  });
  const edge: Edge = await createEdge(p.config, logger);
  const worker: IngestWorker = startIngestWorker(p, logger, opts.worker);
  // The same derive function as the worker's: a refill from ClickHouse makes the same windows.
  const api: Api = await createApi(p.config, logger, {
    clickhouse: p.client,
    deriveWindows: opts.worker?.deriveWindows,
  });
  const tag = uniqueId();
  let projects = 0;

  return {
    p,
    edge,
    api,
    db: p.db,

    /** A new project with a report key and a read key. */
    async project(): Promise<ProjectKeys> {
      projects += 1;
      const project = `r-${tag}-${projects}`;
      const make = async (scope: Scope) =>
        (await edge.keyStore.create(project, { defaultPlan: "unlimited", scope })).key;
      return { project, report: await make("report"), read: await make("read") };
    },

    /** POSTs reports through the edge; every one must be accepted. */
    async send(key: string, reports: Record<string, unknown>[]): Promise<string[]> {
      const ids: string[] = [];
      for (const body of reports) {
        const res = await edge.app.inject({
          method: "POST",
          url: "/api/report",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          payload: JSON.stringify(body),
        });
        expect(res.statusCode, res.body).toBe(200);
        ids.push((res.json() as { id: string }).id);
      }
      return ids;
    },

    /** Waits until the project has `n` reports in ClickHouse. */
    async stored(project: string, n: number) {
      await eventually(
        async () =>
          expect(
            await p.scalar(`SELECT count() FROM ${p.db}.reports_v WHERE project_id = '${project}'`),
          ).toBe(n),
        { timeoutMs: 20_000 },
      );
    },

    get(url: string, key?: string, headers: Record<string, string> = {}) {
      return api.app.inject({
        method: "GET",
        url,
        headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
      }) as Promise<LightMyRequestResponse>;
    },

    /** Rows of an oracle query (parameterised like the API's, but written apart from it). */
    async sql<T>(query: string, params: Record<string, unknown> = {}): Promise<T[]> {
      const rs = await p.client.query({ query, query_params: params, format: "JSONEachRow" });
      return rs.json<T>();
    },

    async close() {
      await api.close();
      await worker.close();
      await edge.queue.obliterate({ force: true }).catch(() => {});
      await edge.close();
      await p.close();
    },
  };
}

export type ReadStack = Awaited<ReturnType<typeof startReadStack>>;
