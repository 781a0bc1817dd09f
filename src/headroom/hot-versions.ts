import type { RedisClient } from "../redis/connections.js";

// The hot copy's versions as the workers make them, pushed: each write of the hot headroom
// publishes its projects' new versions (hot-store.ts), and a read API process subscribed to them
// can tell that an answer it holds is still current without asking Redis — /headroom's one round
// trip, which waited behind ingest's commands, is left for answers that must be made again.
//
// Only projects this process reads are kept (at most `maxProjects`, the oldest dropped first),
// and only while the subscription is live: a connection lost drops them all, since pushes made
// meanwhile are lost too. A version read by a snapshot replaces the one kept only when it is
// newer: versions only grow (a refill starts at its time, writes add one), and a snapshot's reply
// may arrive after a push that came later. A push that never arrives (a copy wiped by hand, a
// Cluster's subscriber moved to another node, a connection dead without closing) keeps an
// answer at most its TTL (READ_HEADROOM_TTL_MS), after which it is made again from a snapshot,
// whose version is then kept.

export interface HotVersions {
  /** The project's version, while the subscription is live and it is known; else undefined. */
  current(project: string): string | undefined;
  /** Before a snapshot: pushes for `project` are kept from now on. */
  track(project: string): void;
  /** A snapshot's version, kept when newer than the one kept (null: none to keep). */
  read(project: string, version: string | null): void;
  /**
   * Calls `listener` when a push moves a tracked project's version (advice reads its copy again
   * then, before it is asked); returns what stops it.
   */
  onMoved(listener: (project: string) => void): () => void;
  close(): Promise<void>;
}

/** Tracked, no version yet. */
const PENDING = Symbol("pending");

export async function createHotVersions(
  subscriber: RedisClient,
  channel: string,
  /** onError: subscribing again after a reconnect failed (the connection's errors: the caller's). */
  opts: { maxProjects: number; onError?: (err: Error) => void },
): Promise<HotVersions> {
  const versions = new Map<string, string | typeof PENDING>();
  const listeners = new Set<(project: string) => void>();
  let live = false;
  let closing = false;

  subscriber.on("message", (from: string, message: string) => {
    if (from !== channel || !live) return;
    let pushed: unknown;
    try {
      pushed = JSON.parse(message);
    } catch {
      return;
    }
    if (pushed === null || typeof pushed !== "object") return;
    for (const [project, version] of Object.entries(pushed)) {
      const kept = versions.get(project);
      if (kept === undefined || kept === version) continue;
      if (typeof version === "string") versions.set(project, version);
      else versions.delete(project);
      for (const listener of listeners) listener(project);
    }
  });
  // Pushes made while the connection was down are lost: forget every version until subscribed
  // again (ioredis reconnects, and subscribes again on `ready`).
  subscriber.on("close", () => {
    live = false;
    versions.clear();
  });
  const subscribe = async () => {
    await subscriber.subscribe(channel);
    if (!closing) live = true;
  };
  subscriber.on("ready", () => {
    if (!live && !closing) subscribe().catch((err: Error) => opts.onError?.(err));
  });
  await subscribe();

  return {
    current(project) {
      const v = live ? versions.get(project) : undefined;
      return typeof v === "string" ? v : undefined;
    },
    track(project) {
      if (!live || versions.has(project)) return;
      if (versions.size >= opts.maxProjects) {
        versions.delete(versions.keys().next().value as string);
      }
      versions.set(project, PENDING);
    },
    read(project, version) {
      // A copy not whole is refilled next, and the refill pushes its version.
      if (version === null || !versions.has(project)) return;
      const kept = versions.get(project);
      if (kept === PENDING || Number(version) > Number(kept)) versions.set(project, version);
    },
    onMoved(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      closing = true;
      listeners.clear();
      live = false;
      versions.clear();
      subscriber.disconnect();
    },
  };
}
