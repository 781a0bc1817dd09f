import { describe, expect, it } from "vitest";
import { hotUpdates } from "../../src/headroom/hot-series.js";
import { HotCopyContendedError, type HotStore } from "../../src/headroom/hot-store.js";
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
  const prepared: unknown[] = [];
  const writes: { updates: unknown; token?: string; prepared?: unknown }[] = [];
  const store = {
    write: async (updates: unknown, token?: string, plan?: unknown) => {
      writes.push({ updates, token, prepared: plan });
      if (fail) throw fail;
      return 0;
    },
    prepare: (updates: unknown, token?: string) => {
      const plan = Promise.resolve({ updates, token });
      prepared.push(plan);
      return plan;
    },
    invalidate: async (projects: Iterable<string>) => {
      invalidated.push(...projects);
    },
  } as unknown as HotStore;
  return { store, invalidated, prepared, writes };
}

const manifest = (rows: ReturnType<typeof row>[], token = "t") =>
  ({ rows, token }) as unknown as Manifest;
const logger = createLogger("silent", "test");

describe("hot headroom hook", () => {
  it("marks the batch's projects for a refill when Redis refuses the script", async () => {
    const refused = Object.assign(new Error("ERR Error running script"), { name: "ReplyError" });
    const { store, invalidated } = fakeStore(refused);
    const hook = createHotHeadroomHook({ store, logger });
    await hook.onStored(manifest([row("p", T, 1, ID(1)), row("q", T, 1, ID(2))]));
    expect(invalidated.sort()).toEqual(["p", "q"]);
  });

  it("fails when copies kept changing under the merge, to be tried again, and marks none for a refill", async () => {
    // A refill would not bring the batch's counts back: the stored hook's retry writes it again.
    const contended = new HotCopyContendedError(["q"]);
    const { store, invalidated } = fakeStore(contended);
    const hook = createHotHeadroomHook({ store, logger });
    await expect(
      hook.onStored(manifest([row("p", T, 1, ID(1)), row("q", T, 1, ID(2))])),
    ).rejects.toBe(contended);
    expect(invalidated).toEqual([]);
  });

  it("writes a batch with what it read ahead as the insert started, if every row was stored", async () => {
    const { store, prepared, writes } = fakeStore(null);
    const hook = createHotHeadroomHook({ store, logger });
    const rows = [row("p", T, 1, ID(1)), row("q", T, 1, ID(2))];
    const m = manifest(rows, "a");
    hook.prepare(m);
    await hook.onStored(m);
    expect(prepared).toHaveLength(1);
    expect(writes).toEqual([{ updates: hotUpdates(rows), token: "a", prepared: prepared[0] }]);
    expect(writes[0]?.prepared).toBe(prepared[0]);
    // Stored without a refused row: merged again from the rows stored, not from the plan.
    const m2 = manifest(rows, "b");
    hook.prepare(m2);
    await hook.onStored({ ...m2, rows: rows.slice(0, 1) });
    expect(writes[1]).toEqual({ updates: hotUpdates(rows.slice(0, 1)), token: "b" });
    // Nothing read ahead (a plan taken already, or dropped): the write reads for itself.
    await hook.onStored(m);
    expect(writes[2]).toEqual({ updates: hotUpdates(rows), token: "a" });
  });

  it("keeps at most 8 batches read ahead, never reads one dropped; an older one's write reads for itself", async () => {
    const { store, prepared, writes } = fakeStore(null);
    const hook = createHotHeadroomHook({ store, logger });
    const ms = Array.from({ length: 9 }, (_, i) => manifest([row("p", T, i, ID(i + 1))], `t${i}`));
    for (const m of ms) hook.prepare(m);
    // The ninth dropped the first before its turn came: 8 read ahead, of t1 to t8.
    hook.prepare(ms[5] as Manifest);
    await hook.onStored(ms[8] as Manifest);
    await hook.onStored(ms[1] as Manifest);
    await hook.onStored(ms[0] as Manifest);
    await hook.onStored(ms[5] as Manifest);
    // t5 read ahead again replaced its first read ahead, which was never made either.
    expect(prepared).toHaveLength(8);
    // Which plan each write had (toBe: toEqual holds any two promises equal).
    expect(writes[0]?.prepared).toBe(prepared[6]);
    expect(writes[1]?.prepared).toBe(prepared[0]);
    expect(writes[2]?.prepared).toBeUndefined();
    expect(writes[3]?.prepared).toBe(prepared[7]);
  });

  it("fails when Redis cannot be reached, so the hook is retried", async () => {
    const { store, invalidated } = fakeStore(new Error("Connection is closed."));
    const hook = createHotHeadroomHook({ store, logger });
    await expect(hook.onStored(manifest([row("p", T, 1, ID(1))]))).rejects.toThrow(
      "Connection is closed",
    );
    expect(invalidated).toEqual([]);
  });
});
