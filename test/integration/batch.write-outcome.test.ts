import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { sendReports } from "../../src/cli/import-sender.js";
import { loadConfig } from "../../src/config.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";
import { type RespCutProxy, startRespCutProxy } from "../helpers/resp-cut-proxy.js";
import { type Kind, matchProject, runCase, storedPerView } from "../helpers/write-outcome.js";

// The edge reaches Redis through a proxy that cuts its connection at one command of a request's
// write path — before Redis takes it, or after Redis applied it but before the answer — one
// command at a time, for a batch with client ids, one without, and a single report. The client
// then resends what the answers advise (with its id). Whatever was cut: a report answered 200
// is stored once in every view; one resent as advised is stored once; `duplicate` is answered
// only for a stored report.

let p: Pipeline;
let proxy: RespCutProxy;
let edge: Edge;
let worker: IngestWorker;
const cutPoints: string[] = [];

beforeAll(async () => {
  p = await startPipeline();
  const port = new URL(inject("redisUrl")).port;
  proxy = await startRespCutProxy(Number(port));
  const config = loadConfig({
    ...p.env,
    REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
    REPORT_ID_PENDING_MS: "1000",
  });
  edge = await createEdge(config, createLogger("silent", "test"));
  worker = startIngestWorker(p, createLogger("silent", "test"));
});

afterAll(async () => {
  await worker?.close();
  await edge?.close();
  await proxy?.close();
  await p?.close();
  // Every cut point and what it was, for the record of this run.
  if (cutPoints.length > 0) console.info(cutPoints.join("\n"));
});

async function everyCut(kind: Kind) {
  for (const mode of ["before", "after"] as const) {
    for (let nth = 1; ; nth++) {
      expect(nth, "commands of one send").toBeLessThan(20);
      const { cut } = await runCase({ edge, p, proxy }, kind, matchProject, nth, mode);
      if (cut === null) break;
      cutPoints.push(`${kind}: command ${nth} (${cut}) cut ${mode}`);
    }
  }
}

it("a batch with ids, cut at each command before or after Redis took it: resent as advised, stored once", {
  timeout: 300_000,
}, async () => {
  await everyCut("batch with ids");
});

it("a batch without ids, cut at each command: what is answered 200 is stored once, nothing twice", {
  timeout: 300_000,
}, async () => {
  await everyCut("batch without ids");
});

it("a single report, cut at each command: answered 200 is stored once, nothing twice", {
  timeout: 300_000,
}, async () => {
  await everyCut("single report");
});

/** `fetch` for sendReports, over the edge's inject: the import's own requests, no socket. */
const injectFetch: typeof fetch = async (input, init) => {
  const res = await edge.app.inject({
    method: "POST",
    url: new URL(String(input)).pathname,
    headers: init?.headers as Record<string, string>,
    payload: init?.body as string,
  });
  return new Response(res.body, {
    status: res.statusCode,
    headers: res.headers as Record<string, string>,
  });
};

it("headroom import run twice, the first over a cut at each command: every report stored once", {
  timeout: 300_000,
}, async () => {
  for (const mode of ["before", "after"] as const) {
    for (let nth = 1; ; nth++) {
      expect(nth, "commands of one send").toBeLessThan(20);
      const { key, projectId } = await edge.keyStore.create(`p-wo-${uniqueId()}`, {
        defaultPlan: "unlimited",
      });
      const items = Array.from({ length: 3 }, (_, i) => ({
        value: clientReport({ app: `r${i}` }),
      }));
      const run = () =>
        sendReports(items, {
          total: items.length,
          url: "http://edge",
          key,
          batchSize: items.length,
          concurrency: 1,
          fetch: injectFetch,
          sleep: () => new Promise((r) => setTimeout(r, 50)),
        });
      proxy.arm(matchProject(projectId), nth, mode);
      const first = await run();
      const { cut } = proxy.disarm();
      const label = `import, command ${nth} (${cut ?? "none"}), cut ${mode}`;
      const second = await run();
      expect(first.counts.accepted + first.counts.refused, label).toBe(items.length);
      expect(second.counts, label).toMatchObject({ accepted: 3, duplicates: 3, refused: 0 });
      await eventually(
        async () => {
          const stored = await storedPerView(p, projectId);
          for (let i = 0; i < items.length; i++) {
            expect(stored.get(`r${i}`), `${label}: report ${i}`).toEqual([1, 1, 1, 1]);
          }
          expect(await p.jobCounts()).toMatchObject({ wait: 0, active: 0, delayed: 0 });
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      if (cut === null) break;
      cutPoints.push(`import: command ${nth} (${cut}) cut ${mode}`);
    }
  }
});
