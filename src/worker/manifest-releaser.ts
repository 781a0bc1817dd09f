import type { RedisClient } from "../redis/connections.js";
import type { ManifestStore } from "./manifest-store.js";
import { sweepManifests } from "./manifest-sweep.js";

/**
 * A completed job can never be delivered again: it leaves its manifest. Completions are released
 * in groups, one round trip per tick; what a crash leaves behind, the periodic sweep releases.
 */
export function createManifestReleaser(opts: {
  store: ManifestStore;
  redis: RedisClient;
  keyPrefix: string;
  sweepMs: number;
  onError: (what: "release" | "sweep", err: unknown) => void;
}) {
  let completed: string[] = [];
  let releasing: Promise<void> = Promise.resolve();
  let sweeper: NodeJS.Timeout | undefined;
  const release = () => {
    const ids = completed;
    completed = [];
    releasing = releasing
      .then(() => opts.store.release(ids))
      .catch((err: unknown) => opts.onError("release", err));
    return releasing;
  };
  const sweep = () =>
    sweepManifests(opts.redis, opts.keyPrefix, opts.store).catch((err: unknown) =>
      opts.onError("sweep", err),
    );
  return {
    completed(jobId: string) {
      if (completed.push(jobId) === 1) setImmediate(release);
    },
    start() {
      void sweep();
      sweeper = setInterval(sweep, opts.sweepMs);
      sweeper.unref();
    },
    /** Releases what completed so far; no more sweeps. */
    async stop() {
      clearInterval(sweeper);
      await release();
    },
  };
}
