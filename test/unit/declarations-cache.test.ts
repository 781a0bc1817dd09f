import { describe, expect, it } from "vitest";
import { createCachedDeclarations } from "../../src/control/declarations-cache.js";
import type { DeclarationsStore } from "../../src/control/declarations-store.js";
import type { DeclaredPool, ProjectDeclarations } from "../../src/providers/declared-limit.js";

// The per-process cache of declarations: asks the store once per project, sees a change within
// one check of the change log, never keeps what a load read before a change it raced, and holds
// a bounded number of projects and bytes. The store is a fake behind the store's own interface
// (the Redis store is tested through the control plane, test/integration/control.declarations).

const pool = (label: string, apps = ["chat"]): DeclaredPool => ({
  provider: "openai",
  label,
  apps,
});

function fakeStore() {
  const data = new Map<string, ProjectDeclarations>();
  const changed = new Map<string, number>();
  let seq = 0;
  const calls = { load: 0, changes: 0 };
  /** A load held until released, to race it against a change. */
  let gate: Promise<void> | null = null;
  const store: Pick<DeclarationsStore, "load" | "changes"> = {
    async load(project) {
      calls.load += 1;
      const value = data.get(project) ?? { limits: [], pools: [] };
      if (gate) await gate;
      return { declarations: value, bytes: JSON.stringify(value).length };
    },
    async changes(after) {
      calls.changes += 1;
      if (after === null) return { seq, projects: [] };
      const projects = [...changed].filter(([, n]) => n > after).map(([p]) => p);
      return { seq, projects };
    },
  };
  return {
    store,
    calls,
    set(project: string, pools: DeclaredPool[]) {
      data.set(project, { limits: [], pools });
      changed.set(project, ++seq);
    },
    hold() {
      let release = () => {};
      gate = new Promise<void>((r) => {
        release = () => {
          gate = null;
          r();
        };
      });
      return release;
    },
  };
}

function clock() {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe("the declarations cache", () => {
  it("asks the store once per project while nothing changes", async () => {
    const f = fakeStore();
    const c = clock();
    f.set("p1", [pool("a")]);
    const cache = createCachedDeclarations(f.store, { now: c.now });
    expect((await cache.forProject("p1")).pools).toEqual([pool("a")]);
    for (let i = 0; i < 10; i++) {
      c.advance(100);
      await cache.forProject("p1");
    }
    expect(f.calls.load).toBe(1);
    // The change log is read at most once a second (checkMs): twice in 1 s and the first ask.
    expect(f.calls.changes).toBeLessThanOrEqual(2);
  });

  it("sees a change within one check of the change log, and only for the changed project", async () => {
    const f = fakeStore();
    const c = clock();
    f.set("p1", [pool("a")]);
    f.set("p2", [pool("b")]);
    const cache = createCachedDeclarations(f.store, { now: c.now, checkMs: 1_000 });
    await cache.forProject("p1");
    await cache.forProject("p2");
    f.set("p1", [pool("a2")]);
    c.advance(1_000);
    // The check runs beside this ask; the next one has the new pools.
    await cache.forProject("p1");
    expect((await cache.forProject("p1")).pools).toEqual([pool("a2")]);
    expect(f.calls.load).toBe(3);
    expect((await cache.forProject("p2")).pools).toEqual([pool("b")]);
    expect(f.calls.load).toBe(3);
  });

  it("does not keep a load that raced a change (its answer was read before it)", async () => {
    const f = fakeStore();
    const c = clock();
    f.set("p1", [pool("old")]);
    const cache = createCachedDeclarations(f.store, { now: c.now, checkMs: 1_000 });
    await cache.forProject("other"); // the first check: the change log's start
    const release = f.hold();
    const loading = cache.forProject("p1"); // reads "old", held before it returns
    f.set("p1", [pool("new")]);
    c.advance(1_000);
    const checking = cache.forProject("p1"); // sees the change while the load is held
    await Promise.resolve();
    release();
    expect((await loading).pools).toEqual([pool("old")]);
    await checking;
    expect((await cache.forProject("p1")).pools).toEqual([pool("new")]);
  });

  it("reads a project again after ttlMs, even with no change logged (a restore logs none)", async () => {
    const f = fakeStore();
    const c = clock();
    const cache = createCachedDeclarations(f.store, { now: c.now, ttlMs: 60_000 });
    await cache.forProject("p1");
    c.advance(59_999);
    await cache.forProject("p1");
    expect(f.calls.load).toBe(1);
    c.advance(1);
    await cache.forProject("p1");
    expect(f.calls.load).toBe(2);
  });

  it("holds at most maxProjects projects, the least recently asked dropped first", async () => {
    const f = fakeStore();
    const c = clock();
    const cache = createCachedDeclarations(f.store, { now: c.now, maxProjects: 3 });
    for (const p of ["p1", "p2", "p3"]) await cache.forProject(p);
    await cache.forProject("p1"); // p2 is now the least recently asked
    await cache.forProject("p4");
    expect(f.calls.load).toBe(4);
    await cache.forProject("p1");
    await cache.forProject("p3");
    expect(f.calls.load).toBe(4);
    await cache.forProject("p2");
    expect(f.calls.load).toBe(5);
  });

  it("holds at most maxBytes of declarations", async () => {
    const f = fakeStore();
    const c = clock();
    const apps = Array.from({ length: 100 }, (_, i) => `app-${i}`);
    for (const p of ["p1", "p2", "p3"]) f.set(p, [pool("big", apps)]);
    const one = JSON.stringify({ limits: [], pools: [pool("big", apps)] }).length;
    // Room for two projects' sets (and their overhead), not three.
    const cache = createCachedDeclarations(f.store, { now: c.now, maxBytes: 2 * one + 1_000 });
    for (const p of ["p1", "p2", "p3"]) await cache.forProject(p);
    await cache.forProject("p3");
    await cache.forProject("p2");
    expect(f.calls.load).toBe(3);
    await cache.forProject("p1");
    expect(f.calls.load).toBe(4);
  });

  it("answers what it holds when the store fails, and fails when it holds nothing", async () => {
    const f = fakeStore();
    const c = clock();
    f.set("p1", [pool("a")]);
    let down = false;
    const store: typeof f.store = {
      load: (p) => (down ? Promise.reject(new Error("redis away")) : f.store.load(p)),
      changes: (a) => (down ? Promise.reject(new Error("redis away")) : f.store.changes(a)),
    };
    const cache = createCachedDeclarations(store, { now: c.now, ttlMs: 1_000 });
    await cache.forProject("p1");
    down = true;
    c.advance(2_000);
    expect((await cache.forProject("p1")).pools).toEqual([pool("a")]);
    await expect(cache.forProject("p2")).rejects.toThrow("redis away");
  });

  it("tries the first check again at the next ask when it failed", async () => {
    const f = fakeStore();
    const c = clock();
    let fail = true;
    const store: typeof f.store = {
      load: f.store.load,
      changes: (a) => (fail ? Promise.reject(new Error("redis away")) : f.store.changes(a)),
    };
    const cache = createCachedDeclarations(store, { now: c.now });
    await expect(cache.forProject("p1")).rejects.toThrow("redis away");
    fail = false;
    expect(await cache.forProject("p1")).toEqual({ limits: [], pools: [] });
  });
});
