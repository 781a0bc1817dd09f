import { createHash } from "node:crypto";
import type { AdviceAsk } from "../../headroom/advice.js";
import {
  type AdviceMoment,
  adviceMoment,
  adviseAt,
  holdsAt,
} from "../../headroom/advice-moment.js";
import type { HotSeries } from "../../headroom/hot-series.js";
import type { PoolGroup } from "../../headroom/pool-view.js";
import type { KeyLookup } from "../../keys/key-store.js";
import type { ProjectDeclarations } from "../../providers/declared-limit.js";
import { type AdviceAnswer, type AdviceAnswers, createAdviceAnswers } from "../advice-answers.js";
import {
  declarationsOf,
  type HeadroomDeps,
  orUnavailable,
  poolView,
  projectSeries,
  sortedPools,
} from "./headroom.js";

// GET /api/v1/advice from memory (docs/pools.md): each project's hot copy is held in this
// process, as the workers last wrote it, and answers are made from it — no ClickHouse and no
// Redis round trip on the answer's path. A project's first answer reads the copy (one round
// trip, or a refill). After that the copy is read again beside the answers when the workers'
// pushed version says it moved on (hot-versions.ts; without pushes, when it is older than
// `maxAgeMs`): at once when the push comes, for a project asked lately, so that the next answer
// has it; at most one read at a time and one per `minReadGapMs` per project.
//
// What is made from a held copy is kept while it holds: its pools (once per copy), their views
// (advice-moment.ts: until a window's state changes) and the answers sent (advice-answers.ts: per
// ask and second, as bytes with their ETag). An answer kept is the first made in its second, so
// its `at` is less than a second old, and its retry_after_ms counts from that `at`.

export interface AdviceMemoryOptions {
  /** Projects held at most (the least recently asked dropped first). */
  maxProjects: number;
  /** Without pushed versions, a held copy older than this is read again. */
  maxAgeMs: number;
  /** A project's copy is read again at most this often. */
  minReadGapMs: number;
  /** A push reads the copy again for a project asked within this long. */
  prefetchForMs: number;
  /** The answers kept (per project and in all: advice-answers.ts's bounds unless a test's). */
  answers?: AdviceAnswers;
}

interface Held {
  version: string | null;
  series: Map<string, HotSeries>;
  /** What the project declared (docs/providers.md), read with the copy and checked each second. */
  declarations: ProjectDeclarations;
  declarationsAt: number;
  readAt: number;
  askedAt: number;
  pools?: PoolGroup[];
  moment?: AdviceMoment;
}

export interface AdviceMemory {
  /**
   * The advice for the key's project at its moment, as sent: body and ETag; at once from a held
   * copy, after reading it for a project not held.
   */
  answer(project: KeyLookup, ask: AdviceAsk): AdviceAnswer | Promise<AdviceAnswer>;
  /** Projects held (for tests and metrics). */
  size(): number;
  /** Stops reading copies again (timers, the versions' listener). */
  close(): void;
}

/**
 * An ask as a key: what changes the answer, no more. `requests` and `tokens` count as at least 1
 * (advice.ts's neededBy), so 0 and 1 are one ask.
 */
export const askKey = (a: AdviceAsk) =>
  JSON.stringify([
    a.provider,
    a.model,
    a.app ?? null,
    a.pool ?? null,
    Math.max(a.requests, 1),
    Math.max(a.tokens, 1),
  ]);

export function createAdviceMemory(deps: HeadroomDeps, opts: AdviceMemoryOptions): AdviceMemory {
  const held = new Map<string, Held>();
  const answers = opts.answers ?? createAdviceAnswers();
  const clock = deps.now ?? Date.now;
  // Reading a project's copy again: when the last read started, whether one is in flight, whether
  // the copy moved on meanwhile, and the timer of one waiting for its gap.
  const reads = new Map<
    string,
    { startedAt: number; inFlight: boolean; again: boolean; timer?: NodeJS.Timeout }
  >();

  async function read(project: string): Promise<Omit<Held, "askedAt">> {
    const readAt = clock();
    const [copy, declarations] = await Promise.all([
      readCopy(project, readAt),
      declarationsOf(deps, project),
    ]);
    return { ...copy, declarations, declarationsAt: readAt };
  }

  async function readCopy(project: string, readAt: number) {
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

  /** The project asked last: already last in `held`. */
  let lastAsked: string | undefined;

  function keep(project: string, h: Held): void {
    held.delete(project);
    lastAsked = project;
    if (held.size >= opts.maxProjects) {
      const oldest = held.keys().next().value as string;
      held.delete(oldest);
      answers.drop(oldest);
      clearTimeout(reads.get(oldest)?.timer);
      reads.delete(oldest);
    }
    held.set(project, h);
    answers.drop(project);
  }

  const current = (project: string, h: Held) => {
    const pushed = deps.versions?.current(project);
    return h.version !== null && pushed !== undefined
      ? pushed === h.version
      : clock() - h.readAt < opts.maxAgeMs;
  };

  /** Reads the project's copy again, now or once its gap has passed; one read at a time. */
  function refresh(project: string): void {
    if (!held.has(project)) return;
    let r = reads.get(project);
    if (!r) {
      r = { startedAt: Number.NEGATIVE_INFINITY, inFlight: false, again: false };
      reads.set(project, r);
    }
    if (r.inFlight) {
      r.again = true;
      return;
    }
    if (r.timer) return;
    const wait = r.startedAt + opts.minReadGapMs - clock();
    if (wait > 0) {
      const state = r;
      state.timer = setTimeout(() => {
        state.timer = undefined;
        const h = held.get(project);
        if (h && !current(project, h)) refresh(project);
      }, wait);
      state.timer.unref();
      return;
    }
    const state = r;
    state.startedAt = clock();
    state.inFlight = true;
    state.again = false;
    read(project)
      .then((fresh) => {
        const before = held.get(project);
        if (before) keep(project, { ...fresh, askedAt: before.askedAt });
      })
      .catch(() => {})
      .finally(() => {
        state.inFlight = false;
        const h = held.get(project);
        if (state.again && h && !current(project, h)) refresh(project);
      });
  }

  const stopListening = deps.versions?.onMoved((project) => {
    const h = held.get(project);
    if (h && clock() - h.askedAt < opts.prefetchForMs && !current(project, h)) refresh(project);
  });

  /** The project's held copy, made the most recently asked (the first dropped is the least). */
  function asked(project: string, now: number): Held | undefined {
    const h = held.get(project);
    if (!h) return undefined;
    if (project !== lastAsked) {
      held.delete(project);
      held.set(project, h);
      lastAsked = project;
    }
    h.askedAt = now;
    if (!current(project, h)) refresh(project);
    // A change of what the project declared reaches the answers within a second (the reader
    // caches; the views are made again when it hands out another list).
    if (deps.declarations && now - h.declarationsAt >= 1_000) {
      h.declarationsAt = now;
      deps.declarations.forProject(project).then(
        (d) => {
          if (d.limits === h.declarations.limits && d.pools === h.declarations.pools) return;
          h.declarations = d;
          h.moment = undefined;
          answers.drop(project);
        },
        () => {},
      );
    }
    return h;
  }

  /** The views of the held copy's pools at `now`: those kept while they hold. */
  function momentOf(project: string, h: Held, now: number): AdviceMoment {
    if (h.moment && holdsAt(h.moment, now)) return h.moment;
    // Without their points: advice reads no burn rate (advice-moment.ts).
    h.pools ??= sortedPools(h.series).map((g) => ({
      ...g,
      series: { ...g.series, p: {}, wp: {} },
    }));
    // No rules: a verdict is room against the ask, not a threshold; stale is the read API's.
    h.moment = adviceMoment(
      h.pools.map((g) => ({
        view: poolView(g, [], now, now, deps.staleAfterMs, h.declarations),
        lastSeen: g.series.ls,
      })),
      now,
      deps.staleAfterMs,
    );
    answers.drop(project);
    return h.moment;
  }

  /** The answer from a held copy: the one kept for this ask and second, else made. */
  function answerFrom(project: string, h: Held, ask: AdviceAsk): AdviceAnswer {
    const now = clock();
    const moment = momentOf(project, h, now);
    const key = askKey(ask);
    const second = Math.floor(now / 1000);
    const kept = answers.get(project, key);
    if (kept && kept.from === moment && kept.second === second) return kept;
    const body = Buffer.from(
      JSON.stringify({ at: new Date(now).toISOString(), ...adviseAt(moment, ask, now) }),
    );
    // The project is in the tag: equal bytes of two projects are two answers.
    const etag = `"${createHash("sha1").update(project).update("\0").update(body).digest("base64url")}"`;
    const answer = { body, etag, from: moment, second };
    answers.set(project, key, answer);
    return answer;
  }

  return {
    answer(project, ask) {
      const id = project.projectId;
      const h = asked(id, clock());
      if (h) return answerFrom(id, h, ask);
      // The project's first ask: its copy is read first.
      return read(id).then((fresh) => {
        const h = held.get(id) ?? { ...fresh, askedAt: clock() };
        if (h !== held.get(id)) keep(id, h);
        return answerFrom(id, h, ask);
      });
    },
    size: () => held.size,
    close() {
      stopListening?.();
      for (const r of reads.values()) clearTimeout(r.timer);
      reads.clear();
    },
  };
}
