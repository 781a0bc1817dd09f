import type { RedisClient } from "../redis/connections.js";
import type { ManifestStore } from "./manifest-store.js";
import { sweepManifests } from "./manifest-sweep.js";

/**
 * A completed job can never be delivered again: it leaves its manifest. Completions are released
 * in groups, one round trip per tick; what a crash leaves behind, the periodic sweep releases.
 * A release may reach another primary than the completion did (a failover in between): the store
 * then keeps a job that primary still queues (manifest-store.ts).
 */
export function createManifestReleaser(opts: {
  store: ManifestStore;
  redis: RedisClient;
  keyPrefix: string;
  sweepMs: number;
  /** Runs before each sweep (the failed set's retention), so that it frees manifests at once. */
  beforeSweep?: () => Promise<unknown>;
  /** Jobs that still hold a manifest after a sweep. */
  onSwept?: (held: number) => void;
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
  const sweep = async () => {
    try {
      await opts.beforeSweep?.();
      opts.onSwept?.(await sweepManifests(opts.redis, opts.keyPrefix, opts.store));
    } catch (err) {
      opts.onError("sweep", err);
    }
  };
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
