import { describe, expect, it } from "vitest";
import { hotUpdates } from "../../src/headroom/hot-series.js";
import type { HotStore } from "../../src/headroom/hot-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { type ReportBody, toRecord, toRow } from "../../src/report/report-schema.js";
import { createHotHeadroomHook } from "../../src/worker/hot-headroom-hook.js";
import type { Manifest } from "../../src/worker/manifest-store.js";

// The worker's hot-headroom hook and the updates it sends: a batch's rows per project and
// series, the newest figures winning and a hint never blanking them; Redis refusing the script
// marks the projects for a refill instead of stopping ingest; Redis unreachable fails the hook
// (so it is retried).

const T = Date.UTC(2030, 0, 1);

function row(project: string, t: number, remaining: number | null, id: string) {
  const body = {
    app: "chat",
    provider: "openai",
    model: null,
    timestamp: t,
    limits: {
      requests_limit: remaining === null ? null : 100,
      requests_remaining: remaining,
      tokens_limit: null,
      tokens_remaining: null,
      reset_requests_ms: null,
      reset_tokens_ms: null,
    },
    credits: null,
  } as ReportBody;
  return toRow(toRecord(body, { reportId: id, projectId: project, keyId: "k", receivedAt: t }));
}

const ID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

describe("hot updates of a batch", () => {
  it("keeps the newest figures per series, a later hint moving only last seen", () => {
    const rows = [row("p", T + 2_000, 70, ID(2)), row("p", T + 1_000, 90, ID(1))];
    rows.push(row("p", T + 3_000, null, ID(3)), row("q", T, 5, ID(4)));
    const updates = hotUpdates(rows);
    expect([...updates.keys()].sort()).toEqual(["p", "q"]);
    const s = updates.get("p")?.get(JSON.stringify(["openai", "", "chat"]));
    expect(s).toMatchObject({ ls: T + 3_000, la: T + 2_000, li: ID(2) });
    expect(s?.l?.slice(0, 2)).toEqual(["100", "70"]);
    expect(s?.p.requests).toEqual([
      [T + 1_000, "90"],
      [T + 2_000, "70"],
    ]);
    expect(s?.ca).toBeUndefined();
  });
});

function fakeStore(fail: Error | null) {
  const invalidated: string[] = [];
  const store = {
    write: async () => {
      if (fail) throw fail;
      return 0;
    },
    invalidate: async (projects: Iterable<string>) => {
      invalidated.push(...projects);
    },
  } as unknown as HotStore;
  return { store, invalidated };
}

const manifest = (rows: ReturnType<typeof row>[]) => ({ rows }) as unknown as Manifest;
const logger = createLogger("silent", "test");

describe("hot headroom hook", () => {
  it("marks the batch's projects for a refill when Redis refuses the script", async () => {
    const refused = Object.assign(new Error("ERR Error running script"), { name: "ReplyError" });
    const { store, invalidated } = fakeStore(refused);
    const hook = createHotHeadroomHook({ store, logger });
    await hook(manifest([row("p", T, 1, ID(1)), row("q", T, 1, ID(2))]));
    expect(invalidated.sort()).toEqual(["p", "q"]);
  });

  it("fails when Redis cannot be reached, so the hook is retried", async () => {
    const { store, invalidated } = fakeStore(new Error("Connection is closed."));
    const hook = createHotHeadroomHook({ store, logger });
    await expect(hook(manifest([row("p", T, 1, ID(1))]))).rejects.toThrow("Connection is closed");
    expect(invalidated).toEqual([]);
  });
});
