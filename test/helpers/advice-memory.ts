import type { AdviceAnswers } from "../../src/api/advice-answers.js";
import { type AdviceMemory, createAdviceMemory } from "../../src/api/queries/advice.js";
import type { ReadStore } from "../../src/api/read-store.js";
import type { HotSeries } from "../../src/headroom/hot-series.js";
import type { HotStore } from "../../src/headroom/hot-store.js";
import type { KeyLookup } from "../../src/keys/key-store.js";

// The advice memory (src/api/queries/advice.ts) over a hot copy held in this process, on a clock
// the test moves: its answers are what the read API sends, made without Redis or ClickHouse. The
// copy stands behind HotStore, the interface the Redis store implements; its version never moves.

export interface MemoryOnCopy {
  memory: AdviceMemory;
  /** The clock the memory reads. */
  clock: { t: number };
  /** Snapshots the memory took of the copy. */
  snapshots: () => number;
}

export function memoryOnCopy(
  copies: (project: string) => Map<string, HotSeries>,
  opts: { staleAfterMs: number; t: number; answers?: AdviceAnswers },
): MemoryOnCopy {
  const clock = { t: opts.t };
  let snapshots = 0;
  const refused = () => Promise.reject(new Error("the copy is read only in this test"));
  const hot: HotStore = {
    write: refused,
    prepare: refused,
    refill: refused,
    invalidate: refused,
    read: async (project) => copies(project),
    snapshot: async (project) => {
      snapshots++;
      return { version: "1", series: copies(project) };
    },
  };
  const store: ReadStore = { db: "none", rows: refused };
  const memory = createAdviceMemory(
    {
      store,
      rulesFor: async () => [],
      staleAfterMs: opts.staleAfterMs,
      hot,
      now: () => clock.t,
    },
    {
      maxProjects: 100_000,
      // Never read again: the copy does not move.
      maxAgeMs: Number.POSITIVE_INFINITY,
      minReadGapMs: 0,
      prefetchForMs: 0,
      answers: opts.answers,
    },
  );
  return { memory, clock, snapshots: () => snapshots };
}

/** A key of `project`, as the read API's authentication hands it to a route. */
export const keyOf = (project: string): KeyLookup => ({
  keyId: `key-${project}`,
  projectId: project,
  scope: "read",
  plan: "unlimited",
  overrides: {},
});
