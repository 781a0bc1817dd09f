import { Redis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { hotUpdates } from "../../src/headroom/hot-series.js";
import { createHotStore, hotKeys } from "../../src/headroom/hot-store.js";
import { createHotVersions } from "../../src/headroom/hot-versions.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";

// The hot copy's versions pushed by the workers' writes, on a real Redis: a tracked project's
// version follows the writes without a read, a snapshot's older version never replaces a push,
// untracked projects are not kept, and a lost subscription forgets every version until it is
// back.

const redis = new Redis(inject("redisUrl"));
const opened: { close(): Promise<void> }[] = [];
afterAll(async () => {
  for (const o of opened) await o.close();
  await redis.quit();
});

async function setup(maxProjects = 100) {
  const prefix = `{hotv-${uniqueId()}}`;
  const store = createHotStore(redis, prefix, { maxSeriesPerProject: 100, ttlMs: 3_600_000 });
  const subscriber = new Redis(inject("redisUrl"));
  const id = String(await subscriber.client("ID"));
  const versions = await createHotVersions(subscriber, hotKeys(prefix).versions, { maxProjects });
  opened.push(versions);
  /** A batch of one report for `project`, as a worker writes it after ClickHouse took it. */
  const write = (project: string) => store.write(hotUpdates([sampleRow(0, project)]));
  return { store, versions, write, id, keys: hotKeys(prefix) };
}

describe("pushed hot versions", () => {
  it("follow a tracked project's writes without a read, as its snapshot would say", async () => {
    const h = await setup();
    await h.store.refill("p", new Map());
    h.versions.track("p");
    const snap = await h.store.snapshot("p", null);
    h.versions.read("p", snap.version);
    expect(h.versions.current("p")).toBe(snap.version);
    await h.write("p");
    const after = (await h.store.snapshot("p", null)).version;
    expect(after).not.toBe(snap.version);
    await eventually(async () => expect(h.versions.current("p")).toBe(after));
  });

  it("keep a push over the older version of a snapshot read before it", async () => {
    const h = await setup();
    await h.store.refill("p", new Map());
    h.versions.track("p");
    const old = (await h.store.snapshot("p", null)).version;
    await h.write("p");
    const pushed = (await h.store.snapshot("p", null)).version;
    await eventually(async () => expect(h.versions.current("p")).toBe(pushed));
    // The snapshot's reply came after the push.
    h.versions.read("p", old);
    expect(h.versions.current("p")).toBe(pushed);
  });

  it("take a snapshot's newer version over the one kept, never an older one", async () => {
    const h = await setup();
    h.versions.track("p");
    h.versions.read("p", "5");
    // A push lost (a dead connection not yet closed): the next snapshot's version is kept.
    h.versions.read("p", "12");
    expect(h.versions.current("p")).toBe("12");
    h.versions.read("p", "9");
    expect(h.versions.current("p")).toBe("12");
  });

  it("ignore a message on the channel that is not an object of versions", async () => {
    const h = await setup();
    await h.store.refill("p", new Map());
    h.versions.track("p");
    h.versions.read("p", (await h.store.snapshot("p", null)).version);
    for (const m of ["null", "42", '"x"', "not json", "[1]"])
      await redis.publish(h.keys.versions, m);
    await h.write("p");
    const after = (await h.store.snapshot("p", null)).version;
    await eventually(async () => expect(h.versions.current("p")).toBe(after));
  });

  it("keep no project that was not tracked, and drop one whose copy was invalidated", async () => {
    const h = await setup();
    await h.store.refill("p", new Map());
    await h.store.refill("q", new Map());
    h.versions.track("p");
    await h.write("q");
    await h.write("p");
    await eventually(async () => expect(h.versions.current("p")).toBeDefined());
    expect(h.versions.current("q")).toBeUndefined();
    await h.store.invalidate(["p"]);
    await eventually(async () => expect(h.versions.current("p")).toBeUndefined());
  });

  it("keep at most maxProjects, the oldest tracked dropped first", async () => {
    const h = await setup(2);
    for (const p of ["a", "b", "c"]) {
      h.versions.track(p);
      h.versions.read(p, "1");
    }
    expect(["a", "b", "c"].map((p) => h.versions.current(p))).toEqual([undefined, "1", "1"]);
  });

  it("forget every version when the subscription is lost, and follow pushes again once back", async () => {
    const h = await setup();
    await h.store.refill("p", new Map());
    h.versions.track("p");
    h.versions.read("p", (await h.store.snapshot("p", null)).version);
    expect(h.versions.current("p")).toBeDefined();
    await redis.client("KILL", "ID", h.id);
    await eventually(async () => expect(h.versions.current("p")).toBeUndefined());
    // A write while it was down is not pushed to it; once subscribed again, tracking starts anew.
    await eventually(
      async () => {
        h.versions.track("p");
        h.versions.read("p", "0");
        expect(h.versions.current("p")).toBe("0");
      },
      { timeoutMs: 10_000 },
    );
    await h.write("p");
    const after = (await h.store.snapshot("p", null)).version;
    await eventually(async () => expect(h.versions.current("p")).toBe(after));
  });
});
