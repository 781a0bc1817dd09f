import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { sendReports } from "../../src/cli/import-sender.js";
import { loadConfig } from "../../src/config.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";
import { type CutMode, type RespCutProxy, startRespCutProxy } from "../helpers/resp-cut-proxy.js";

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

type Item = { id?: string; duplicate?: boolean; error?: string; message?: string };
type Kind = "batch with ids" | "batch without ids" | "single report";

async function post(key: string, kind: Kind, body: Record<string, unknown>[]) {
  const single = kind === "single report";
  const res = await edge.app.inject({
    method: "POST",
    url: single ? "/api/report" : "/api/reports",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(single ? body[0] : body),
  });
  const json = res.json();
  if (json.results) return json.results as Item[];
  // A whole request answered with one error (or a single report): each item answered so.
  return body.map(() => json as Item);
}

/** Whether an answer advises sending the report again (the same, with its id if it has one). */
const resendAdvised = (r: Item) =>
  r.error === "unavailable" && !/may count it twice/.test(r.message ?? "");

/** Rows of each tag (app) in `reports`, `reports_v` and the two rollups. */
async function storedPerView(project: string) {
  const views = ["reports", "reports_v", "reports_daily_v", "reports_minute_v"];
  const out = new Map<string, number[]>();
  for (const [v, view] of views.entries()) {
    const agg = view.startsWith("reports_") && view !== "reports_v" ? "sum(reports)" : "count()";
    const rs = await p.client.query({
      query: `SELECT app, ${agg} FROM ${p.db}.${view} WHERE project_id = {p:String} GROUP BY app`,
      query_params: { p: project },
      format: "JSONCompactEachRow",
    });
    for (const [app, n] of await rs.json<[string, string]>()) {
      const counts = out.get(app) ?? [0, 0, 0, 0];
      counts[v] = Number(n);
      out.set(app, counts);
    }
  }
  return out;
}

/** The write path's commands (scripts) for this project: ids, limits, the job, its settling. */
const matchProject = (project: string) => (args: string[]) =>
  /^eval/i.test(args[0] ?? "") && args.some((a) => a.includes(project));

/**
 * One case: `n` reports of `kind`, the first send cut at the `nth` command that names the
 * project; then resends as advised. Returns what was cut, or null when the send had fewer
 * commands (every cut point was tried).
 */
async function runCase(kind: Kind, nth: number, mode: CutMode): Promise<string | null> {
  const { key, projectId } = await edge.keyStore.create(`p-wo-${uniqueId()}`, {
    defaultPlan: "unlimited",
  });
  const n = kind === "single report" ? 1 : 3;
  const body = Array.from({ length: n }, (_, i) =>
    clientReport({
      app: `r${i}`,
      ...(kind === "batch with ids" ? { id: randomUUID() } : {}),
    }),
  );
  proxy.arm(matchProject(projectId), nth, mode);
  const first = await post(key, kind, body);
  const { cut } = proxy.disarm();
  const label = `${kind}, command ${nth} (${cut ?? "none"}), cut ${mode}`;

  // What each report was last told, and whether a `duplicate` came for one not stored.
  const last: Item[] = [...first];
  const duplicates = new Set<number>();
  const ok = new Set<number>();
  const note = (i: number, r: Item) => {
    last[i] = r;
    if (r.duplicate) duplicates.add(i);
    else if (r.id) ok.add(i);
  };
  for (const [i, r] of first.entries()) note(i, r);
  await eventually(
    async () => {
      const todo = last.flatMap((r, i) => (resendAdvised(r) ? [i] : []));
      if (todo.length === 0) return;
      const again = await post(
        key,
        kind,
        todo.map((i) => body[i] as Record<string, unknown>),
      );
      for (const [j, i] of todo.entries()) note(i, again[j] as Item);
      expect(last.filter(resendAdvised), `${label}: still advised to resend`).toEqual([]);
    },
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  // Every report now has an id, or was told it may be stored and not to resend without one.
  const settled = await eventually(
    async () => {
      const stored = await storedPerView(projectId);
      for (const i of [...ok, ...duplicates]) {
        expect(stored.get(`r${i}`), `${label}: report ${i} (${JSON.stringify(last[i])})`).toEqual([
          1, 1, 1, 1,
        ]);
      }
      expect(await p.jobCounts()).toMatchObject({ wait: 0, active: 0, delayed: 0 });
      return stored;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  // After the queue drained: nothing stored twice, and nothing unanswered with an id.
  for (let i = 0; i < n; i++) {
    const counts = settled.get(`r${i}`) ?? [0, 0, 0, 0];
    expect(Math.max(...counts), `${label}: report ${i} stored at most once`).toBeLessThanOrEqual(1);
    if (kind === "batch with ids") {
      expect(last[i]?.id, `${label}: report ${i} answered with its id`).toBe(body[i]?.id);
    }
  }
  return cut;
}

async function everyCut(kind: Kind) {
  for (const mode of ["before", "after"] as const) {
    for (let nth = 1; ; nth++) {
      expect(nth, "commands of one send").toBeLessThan(20);
      const cut = await runCase(kind, nth, mode);
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
          const stored = await storedPerView(projectId);
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
