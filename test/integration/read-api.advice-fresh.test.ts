import { Redis } from "ioredis";
import { afterAll, expect, inject, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { createAdviceMemory } from "../../src/api/queries/advice.js";
import type { ReadStore } from "../../src/api/read-store.js";
import { hotUpdates } from "../../src/headroom/hot-series.js";
import { createHotStore, type HotStore, hotKeys } from "../../src/headroom/hot-store.js";
import { createHotVersions } from "../../src/headroom/hot-versions.js";
import { REPORT_COLUMNS } from "../../src/report/report-schema.js";
import { keyOf } from "../helpers/advice-memory.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";

// How soon advice moves on after a report, on a real Redis (src/api/queries/advice.ts): when the
// workers push a project's new version, the copy of a project asked lately is read again at once,
// before anyone asks, so the next answer — a client's next ask a second later — has the report.
// A project not asked lately is not read on a push (its next ask reads it, beside the answer).

const redis = new Redis(inject("redisUrl"));
const opened: { close(): Promise<void> | void }[] = [];
afterAll(async () => {
  for (const o of opened) await o.close();
  await redis.quit();
});

const T = Date.now();
const at = (c: string) => REPORT_COLUMNS.indexOf(c as (typeof REPORT_COLUMNS)[number]);
const chTime = (t: number) => new Date(t).toISOString().replace("T", " ").replace("Z", "");

/** A gpt-4o report of `project` with `remaining` requests left, sent `ago` ms before now. */
function row(project: string, remaining: number, ago: number) {
  const r = sampleRow(0, project);
  r[at("provider")] = "openai";
  r[at("model")] = "gpt-4o";
  r[at("app")] = "chat";
  r[at("timestamp")] = chTime(T - ago);
  r[at("requests_limit")] = "1000";
  r[at("requests_remaining")] = String(remaining);
  r[at("headers")] = null;
  r[at("error")] = null;
  return r;
}

async function setup(prefetchForMs: number) {
  const prefix = `{advfresh-${uniqueId()}}`;
  const store = createHotStore(redis, prefix, { maxSeriesPerProject: 100, ttlMs: 3_600_000 });
  let snapshots = 0;
  const counted: HotStore = {
    ...store,
    snapshot: (project, held) => {
      snapshots++;
      return store.snapshot(project, held);
    },
  };
  const subscriber = new Redis(inject("redisUrl"));
  const versions = await createHotVersions(subscriber, hotKeys(prefix).versions, {
    maxProjects: 100,
  });
  const none = () => Promise.reject(new Error("no ClickHouse in this test"));
  const memory = createAdviceMemory(
    {
      store: { db: "none", rows: none } as ReadStore,
      rulesFor: async () => [],
      staleAfterMs: 900_000,
      hot: counted,
      versions,
    },
    { maxProjects: 100, maxAgeMs: 500, minReadGapMs: 0, prefetchForMs },
  );
  opened.push(memory, versions);
  const project = `p-${uniqueId()}`;
  await store.refill(project, new Map());
  await store.write(hotUpdates([row(project, 900, 2_000)]));
  const remaining = async () => {
    const answer = await memory.answer(keyOf(project), {
      provider: "openai",
      model: "gpt-4o",
      requests: 1,
      tokens: 0,
    });
    const body = JSON.parse(answer.body.toString()) as {
      windows: { dimension: string; remaining: number | null }[];
    };
    return body.windows.find((w) => w.dimension === "requests")?.remaining;
  };
  return { store, versions, project, remaining, snapshots: () => snapshots };
}

it("reads a lately asked project's copy again when its version is pushed, before the next ask", async () => {
  const h = await setup(60_000);
  expect(await h.remaining()).toBe(900);
  expect(h.snapshots()).toBe(1);
  await h.store.write(hotUpdates([row(h.project, 850, 1_000)]));
  // No ask meanwhile: the push alone reads it.
  await eventually(async () => expect(h.snapshots()).toBe(2));
  await eventually(async () => expect(await h.remaining()).toBe(850));
  expect(h.snapshots()).toBe(2);
});

it("leaves a project not asked lately to its next ask", async () => {
  const h = await setup(0);
  expect(await h.remaining()).toBe(900);
  await h.store.write(hotUpdates([row(h.project, 850, 1_000)]));
  const moved = (await h.store.snapshot(h.project, null)).version;
  await eventually(async () => expect(h.versions.current(h.project)).toBe(moved));
  expect(h.snapshots()).toBe(1);
  // The next ask is answered from what is held, and reads the copy beside it.
  expect(await h.remaining()).toBe(900);
  await eventually(async () => expect(await h.remaining()).toBe(850));
  expect(h.snapshots()).toBe(2);
});
