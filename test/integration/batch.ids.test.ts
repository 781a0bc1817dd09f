import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { type Proc, startProcess } from "../../fixtures/processes.js";
import { loadConfig } from "../../src/config.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startPipeline } from "../helpers/pipeline.js";
import { startRespCutProxy } from "../helpers/resp-cut-proxy.js";

// A batch whose reports carry client ids, sent three times: twice at once (a retry racing the
// first send), and once more after the worker holding its jobs was SIGKILLed. Each report is
// stored once, in `reports` before any merge, in reports_v and in every rollup.

const PROJECT = `p-ids-${uniqueId()}`;
let p: Pipeline;
let edge: Edge;
let key: string;
const procs: Proc[] = [];

beforeAll(async () => {
  p = await startPipeline();
  edge = await createEdge(p.config, createLogger("silent", "test"));
  ({ key } = await edge.keyStore.create(PROJECT, { defaultPlan: "unlimited" }));
});

afterAll(async () => {
  for (const w of procs) w.signal("SIGKILL");
  await Promise.all(procs.map((w) => w.exited));
  await edge?.close();
  await p?.close();
});

type Result = { id?: string; duplicate?: boolean; error?: string };

async function send(
  body: unknown[],
  to: { edge: Edge; key: string } = { edge, key },
): Promise<{ status: number; results: Result[] }> {
  const res = await to.edge.app.inject({
    method: "POST",
    url: "/api/reports",
    headers: { authorization: `Bearer ${to.key}`, "content-type": "application/json" },
    payload: JSON.stringify(body),
  });
  return { status: res.statusCode, results: res.json().results };
}

/** Sends the batch, and again what came back `unavailable` (an id another request held). */
async function sendUntilAnswered(body: Record<string, unknown>[]): Promise<Result[]> {
  const answers: Result[] = new Array(body.length);
  let todo = body.map((_, i) => i);
  for (let round = 0; todo.length > 0; round++) {
    expect(round, "rounds of retries").toBeLessThan(50);
    const { results } = await send(todo.map((i) => body[i] as Record<string, unknown>));
    const again: number[] = [];
    results.forEach((r, j) => {
      const i = todo[j] as number;
      if (r.error === "unavailable") again.push(i);
      else answers[i] = r;
    });
    todo = again;
    if (todo.length > 0) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return answers;
}

const count = (sql: string) => p.scalar(sql.replaceAll("$db", p.db).replace("$p", PROJECT));

it("the same batch with ids sent 3 times, at once and after a worker SIGKILL: stored once", {
  timeout: 120_000,
}, async () => {
  const N = 200;
  const body = Array.from({ length: N }, () => clientReport({ id: randomUUID() }));
  const ids = body.map((r) => r.id as string);

  // Twice at once: every id is taken by exactly one of the two sends.
  const [first, second] = await Promise.all([sendUntilAnswered(body), sendUntilAnswered(body)]);
  for (let i = 0; i < N; i++) {
    const pair = [first[i], second[i]];
    expect(pair.map((r) => r?.id)).toEqual([ids[i], ids[i]]);
    expect(pair.filter((r) => r?.duplicate === true)).toHaveLength(1);
  }

  // A worker takes the jobs, holds them (it waits a minute to fill its insert) and is killed.
  const holder = startProcess("workers/ingest.ts", {
    ...p.env,
    BATCH_MAX_WAIT_MS: "60000",
    BATCH_MAX_ROWS: "100000",
  });
  procs.push(holder);
  await eventually(
    async () => {
      const c = await p.jobCounts();
      expect(c.wait).toBe(0);
      expect(c.active).toBeGreaterThan(0);
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  holder.signal("SIGKILL");
  expect((await holder.exited).signal).toBe("SIGKILL");

  // The third send: every report is a duplicate, and nothing more is queued.
  const third = await send(body);
  expect(third.status).toBe(200);
  expect(third.results).toEqual(ids.map((id) => ({ id, duplicate: true })));

  const worker = startProcess("workers/ingest.ts", p.env);
  procs.push(worker);
  await eventually(
    async () => {
      expect(await p.distinctCount(PROJECT)).toBe(N);
      expect(await p.jobCounts()).toStrictEqual(DRAINED);
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  expect(await p.rawCount(PROJECT)).toBe(N);
  expect(await count("SELECT count() FROM $db.reports_v WHERE project_id = '$p'")).toBe(N);
  expect(await p.rollupCount(PROJECT)).toBe(N);
  expect(await count("SELECT sum(reports) FROM $db.reports_minute_v WHERE project_id = '$p'")).toBe(
    N,
  );
  const stored = await p.client.query({
    query: `SELECT toString(report_id) AS id FROM ${p.db}.reports WHERE project_id = '${PROJECT}'`,
    format: "JSONEachRow",
  });
  expect((await stored.json<{ id: string }>()).map((r) => r.id).sort()).toEqual([...ids].sort());
});

it("a repeat of an id within REPORT_ID_PENDING_MS is told to try again; after it, a written job's ids are duplicates", async () => {
  const project = `p-ids-pending-${uniqueId()}`;
  const own = (await edge.keyStore.create(project, { defaultPlan: "unlimited" })).key;
  const proxy = await startRespCutProxy(Number(new URL(inject("redisUrl")).port));
  const claimers: Edge[] = [];
  // An edge whose claims last `pendingMs` and whose Redis connection is cut before it settles
  // them: its job is written and its claims stay pending, as a request that died after
  // enqueuing leaves them.
  const claimWithoutSettling = async (pendingMs: number, body: Record<string, unknown>[]) => {
    const claimer = await createEdge(
      loadConfig({
        ...p.env,
        REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
        REPORT_ID_PENDING_MS: String(pendingMs),
      }),
      createLogger("silent", "test"),
    );
    claimers.push(claimer);
    // The settle script's call: the project's id keys, then the job's token and prefix, the
    // outcome ("s", "u" or "d") and the stored claims' TTL.
    proxy.arm(
      (args) =>
        /^eval/i.test(args[0] ?? "") &&
        args.some((a) => a.includes(`:ids:{${project}}:`)) &&
        ["s", "u", "d"].includes(args.at(-2) ?? ""),
      1,
      "before",
    );
    const first = await send(body, { edge: claimer, key: own });
    expect(proxy.disarm().cut, "the settle was cut").not.toBeNull();
    expect(first.status).toBe(200);
    expect(first.results).toEqual(body.map((r) => ({ id: r.id })));
  };
  try {
    // Within the window (10 minutes, REPORT_ID_PENDING_MS's most): the documented answer.
    const young = [clientReport({ id: randomUUID() }), clientReport({ id: randomUUID() })];
    await claimWithoutSettling(600_000, young);
    const repeat = await send(young, { edge, key: own });
    expect(repeat.status).toBe(207);
    expect(repeat.results).toEqual(
      young.map(() => ({
        error: "unavailable",
        message:
          "a report with this id is being enqueued by another request: send it again shortly",
      })),
    );

    // After the window (1 s, its least; polled, however long a loaded machine takes): the claim
    // is settled by the repeat, and its job was written, so each report is a duplicate, and
    // stays one.
    const old = [clientReport({ id: randomUUID() }), clientReport({ id: randomUUID() })];
    await claimWithoutSettling(1_000, old);
    const duplicates = old.map((r) => ({ id: r.id, duplicate: true }));
    await eventually(
      async () => expect((await send(old, { edge, key: own })).results).toEqual(duplicates),
      {
        timeoutMs: 30_000,
        intervalMs: 100,
      },
    );
    expect((await send(old, { edge, key: own })).results).toEqual(duplicates);
  } finally {
    for (const c of claimers) await c.close();
    await proxy.close();
  }
});
