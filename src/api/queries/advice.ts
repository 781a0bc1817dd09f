import { HISTORY_WINDOW_MS } from "../../alerts/burn-rate.js";
import { type AdviceAsk, type AdvisedPool, advise } from "../../headroom/advice.js";
import type { HotSeries } from "../../headroom/hot-series.js";
import type { KeyLookup } from "../../keys/key-store.js";
import {
  declarationsOf,
  type HeadroomDeps,
  orUnavailable,
  poolViews,
  projectSeries,
} from "./headroom.js";

// GET /api/v1/advice from memory (docs/pools.md): each project's hot copy is held in this
// process, as the workers last wrote it, and an answer is computed from it for its own moment —
// no ClickHouse and no Redis round trip on the answer's path. A project's first answer reads the
// copy (one round trip, or a refill); after that, when the workers' pushed version says the copy
// moved on (hot-versions.ts; without pushes, when the held copy is older than `maxAgeMs`), the
// answer is given from what is held and the copy is read again beside it, once at a time, so
// the next answer has it: an answer is one read behind a report at most.

export interface AdviceMemoryOptions {
  /** Projects held at most (the least recently asked dropped first). */
  maxProjects: number;
  /** Without pushed versions, a held copy older than this is read again. */
  maxAgeMs: number;
}

interface Held {
  version: string | null;
  series: Map<string, HotSeries>;
  readAt: number;
  reading?: Promise<void>;
}

export interface AdviceMemory {
  /** The advice for the key's project, at `now`. */
  advise(project: KeyLookup, ask: AdviceAsk): Promise<ReturnType<typeof advise> & { at: string }>;
  /** Projects held (for tests and metrics). */
  size(): number;
}

export function createAdviceMemory(deps: HeadroomDeps, opts: AdviceMemoryOptions): AdviceMemory {
  const held = new Map<string, Held>();
  const clock = deps.now ?? Date.now;

  async function read(project: string): Promise<Held> {
    const readAt = clock();
    if (deps.hot) {
      deps.versions?.track(project);
      const snap = await orUnavailable(deps.hot.snapshot(project, null));
      deps.versions?.read(project, snap.version);
      if (snap.version !== null && snap.series)
        return { version: snap.version, series: snap.series, readAt };
    }
    // No whole copy (Redis lost it, or none is kept): read as /headroom does, refilling it.
    return { version: null, series: await projectSeries(deps, project, readAt), readAt };
  }

  function keep(project: string, h: Held): void {
    held.delete(project);
    if (held.size >= opts.maxProjects) held.delete(held.keys().next().value as string);
    held.set(project, h);
  }

  async function seriesOf(project: string): Promise<Map<string, HotSeries>> {
    const h = held.get(project);
    if (!h) {
      const fresh = await read(project);
      keep(project, fresh);
      return fresh.series;
    }
    // Most recently asked last: the first dropped is the least recently asked.
    held.delete(project);
    held.set(project, h);
    const pushed = deps.versions?.current(project);
    const current =
      h.version !== null && pushed !== undefined
        ? pushed === h.version
        : clock() - h.readAt < opts.maxAgeMs;
    if (!current && !h.reading) {
      h.reading = read(project)
        .then((fresh) => {
          if (held.has(project)) keep(project, fresh);
        })
        .catch(() => {})
        .finally(() => {
          h.reading = undefined;
        });
    }
    return h.series;
  }

  return {
    async advise(project, ask) {
      const [series, declarations] = await Promise.all([
        seriesOf(project.projectId),
        declarationsOf(deps, project.projectId),
      ]);
      const now = clock();
      const since = Math.floor(now / 1000) * 1000 - HISTORY_WINDOW_MS;
      // No rules: a verdict is room against the ask, not a threshold; stale is the read API's.
      const pools = poolViews(
        series,
        {},
        [],
        since,
        now,
        deps.staleAfterMs,
        declarations,
      ) as AdvisedPool[];
      return { at: new Date(now).toISOString(), ...advise(pools, ask, now) };
    },
    size: () => held.size,
  };
}
