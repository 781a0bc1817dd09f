import { describe, expect, it } from "vitest";
import { DataError, insertIsolating } from "../../src/worker/bisecting-insert.js";

// Splitting a refused batch until its bad rows are isolated, against a fake table that refuses
// any insert holding a bad row (as ClickHouse refuses a whole INSERT for one unparseable row).

function fakeTable(isBad: (item: string) => boolean = (item) => item.startsWith("bad")) {
  const attempts: { items: string[]; token: string }[] = [];
  const stored: string[] = [];
  const refusals: unknown[] = [];
  const insert = async (items: string[], token: string) => {
    attempts.push({ items, token });
    const bad = items.find(isBad);
    if (bad) throw new DataError("refused", { cause: `cannot parse ${bad}` });
    stored.push(...items);
  };
  const run = (items: string[], token = "t") =>
    insertIsolating(items, token, insert, (cause) => refusals.push(cause));
  return { run, attempts, stored, refusals };
}

const items = (n: number) => Array.from({ length: n }, (_, i) => `r${i}`);

describe("insertIsolating", () => {
  it("inserts a good batch in one call with the batch's token", async () => {
    const table = fakeTable();
    await expect(table.run(items(5))).resolves.toEqual([]);
    expect(table.attempts).toEqual([{ items: items(5), token: "t" }]);
    expect(table.stored).toEqual(items(5));
  });

  it("isolates one bad row among many; every other row is inserted", async () => {
    const table = fakeTable();
    const batch = items(16);
    batch.splice(11, 0, "bad-1");
    const refused = await table.run(batch);
    expect(refused).toEqual([["bad-1", "cannot parse bad-1"]]);
    expect([...table.stored].sort()).toEqual(items(16).sort());
    // Halving: one refusal per level, 17 → 8 → 4 → 2 → 1 rows, not one per row.
    expect(table.refusals).toHaveLength(5);
  });

  it("isolates several bad rows, each with its own reason", async () => {
    const table = fakeTable();
    const refused = await table.run(["bad-a", "r1", "r2", "r3", "r4", "r5", "bad-b"]);
    expect(refused).toEqual([
      ["bad-a", "cannot parse bad-a"],
      ["bad-b", "cannot parse bad-b"],
    ]);
    expect(table.stored.sort()).toEqual(["r1", "r2", "r3", "r4", "r5"]);
  });

  it("derives each part's token from its parent's", async () => {
    const table = fakeTable();
    await table.run(["a", "b", "c", "bad"], "manifest-7");
    expect(table.attempts).toEqual([
      { items: ["a", "b", "c", "bad"], token: "manifest-7" },
      { items: ["a", "b"], token: "manifest-7.0" },
      { items: ["c", "bad"], token: "manifest-7.1" },
      { items: ["c"], token: "manifest-7.1.0" },
      { items: ["bad"], token: "manifest-7.1.1" },
    ]);
  });

  it("gives the odd row to the first half, so a retry after an upgrade splits the same way", async () => {
    const table = fakeTable();
    await table.run(["a", "bad", "c"], "m");
    expect(table.attempts.map((a) => [a.token, a.items])).toEqual([
      ["m", ["a", "bad", "c"]],
      ["m.0", ["a", "bad"]],
      ["m.0.0", ["a"]],
      ["m.0.1", ["bad"]],
      ["m.1", ["c"]],
    ]);
  });

  it("makes a retried split byte-identical to the first, so ClickHouse can deduplicate it", async () => {
    const batch = ["r0", "bad-x", "r2", "r3", "r4", "bad-y", "r6"];
    const first = fakeTable();
    const retry = fakeTable();
    await first.run(batch, "m");
    await retry.run(batch, "m");
    expect(retry.attempts).toEqual(first.attempts);
    expect(new Set(first.attempts.map((a) => a.token)).size).toBe(first.attempts.length);
  });

  it("rethrows a failure that is not about the data, at once", async () => {
    const down = new Error("ECONNREFUSED");
    let calls = 0;
    const insert = async () => {
      calls += 1;
      throw down;
    };
    await expect(insertIsolating(["a", "b"], "t", insert, () => {})).rejects.toBe(down);
    expect(calls).toBe(1);
  });

  it("rethrows a failure that is not about the data in the middle of a split", async () => {
    const down = new Error("ClickHouse went away");
    const insert = async (batch: string[]) => {
      if (batch.length === 4) throw new DataError("refused");
      if (batch.includes("c")) throw down;
    };
    await expect(insertIsolating(["a", "b", "c", "d"], "t", insert, () => {})).rejects.toBe(down);
  });
});
