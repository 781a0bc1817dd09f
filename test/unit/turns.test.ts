import { describe, expect, it } from "vitest";
import { createTurns, type Kind } from "../../src/local/clickhouse/turns.js";

// The embedded engine's turns: one query at a time, inserts before queued reads, and a read that
// two inserts went before goes next.

function harness(maxOvertakes?: number) {
  const turns = createTurns(maxOvertakes);
  const started: string[] = [];
  const finish = new Map<string, () => void>();
  let running = 0;
  let most = 0;
  const ask = (kind: Kind, name: string) =>
    turns.run(kind, async () => {
      started.push(name);
      running += 1;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => finish.set(name, resolve));
      running -= 1;
      return name;
    });
  const settle = async (name: string) => {
    finish.get(name)?.();
    await new Promise((r) => setImmediate(r));
  };
  return { turns, started, ask, settle, most: () => most };
}

describe("embedded engine turns", () => {
  it("runs one at a time, inserts before reads that are waiting", async () => {
    const h = harness();
    const answers = [h.ask("read", "r1"), h.ask("read", "r2"), h.ask("insert", "i1")];
    await new Promise((r) => setImmediate(r));
    expect(h.started).toEqual(["r1"]);
    await h.settle("r1");
    // r2 came first, but the insert goes before it.
    expect(h.started).toEqual(["r1", "i1"]);
    await h.settle("i1");
    await h.settle("r2");
    expect(await Promise.all(answers)).toEqual(["r1", "r2", "i1"]);
    expect(h.most()).toBe(1);
  });

  it("lets a read go after two inserts went before it, however many wait", async () => {
    const h = harness();
    h.ask("insert", "i1");
    h.ask("read", "r1");
    for (const name of ["i2", "i3", "i4", "i5"]) h.ask("insert", name);
    await new Promise((r) => setImmediate(r));
    // i1 was running when r1 came: it did not go before it.
    for (const name of ["i1", "i2", "i3"]) await h.settle(name);
    expect(h.started).toEqual(["i1", "i2", "i3", "r1"]);
    await h.settle("r1");
    expect(h.started).toEqual(["i1", "i2", "i3", "r1", "i4"]);
  });

  it("passes a task's failure to its caller and goes on with the next", async () => {
    const turns = createTurns();
    const failed = turns.run("insert", async () => {
      throw new Error("refused");
    });
    const next = turns.run("read", async () => "answered");
    await expect(failed).rejects.toThrow("refused");
    expect(await next).toBe("answered");
    // A task that throws before it returns a promise fails its caller the same way.
    const thrown = turns.run("read", (() => {
      throw new Error("at once");
    }) as () => Promise<never>);
    await expect(thrown).rejects.toThrow("at once");
    expect(await turns.run("insert", async () => "next")).toBe("next");
    await turns.idle();
  });

  it("is idle only when nothing runs and nothing waits", async () => {
    const h = harness();
    h.ask("read", "r1");
    h.ask("insert", "i1");
    await new Promise((r) => setImmediate(r));
    let idle = false;
    void h.turns.idle().then(() => {
      idle = true;
    });
    await h.settle("r1");
    expect(idle).toBe(false);
    await h.settle("i1");
    expect(idle).toBe(true);
  });
});
