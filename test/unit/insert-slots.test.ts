import { describe, expect, it } from "vitest";
import { createInsertSlots } from "../../src/worker/insert-slots.js";

// At most N inserts at once; the others start in the order they asked, as slots free up, whether
// the insert before them succeeded or failed.

function deferred() {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const flush = () => new Promise((r) => setImmediate(r));

describe("insert slots", () => {
  it("runs at most `slots` at once, the rest in the order they asked", async () => {
    const inSlot = createInsertSlots(2);
    const started: string[] = [];
    const gates = new Map<string, ReturnType<typeof deferred>>();
    const run = (name: string) =>
      inSlot(() => {
        started.push(name);
        const d = deferred();
        gates.set(name, d);
        return d.promise;
      });
    // Observed at once, so that a's failure is handled when it happens.
    const runs = ["a", "b", "c", "d"].map((name) =>
      run(name).then(
        () => "fulfilled",
        () => "rejected",
      ),
    );
    await flush();
    expect(started).toEqual(["a", "b"]);
    gates.get("b")?.resolve();
    await flush();
    expect(started).toEqual(["a", "b", "c"]);
    gates.get("a")?.reject(new Error("ClickHouse down"));
    await flush();
    expect(started).toEqual(["a", "b", "c", "d"]);
    gates.get("c")?.resolve();
    gates.get("d")?.resolve();
    expect(await Promise.all(runs)).toEqual(["rejected", "fulfilled", "fulfilled", "fulfilled"]);
  });

  it("passes the insert's value and error through", async () => {
    const inSlot = createInsertSlots(1);
    await expect(inSlot(async () => 7)).resolves.toBe(7);
    await expect(
      inSlot(async () => {
        throw new Error("refused");
      }),
    ).rejects.toThrow("refused");
    // The failure freed the only slot.
    await expect(inSlot(async () => "next")).resolves.toBe("next");
  });
});
