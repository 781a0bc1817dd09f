import { createHash } from "node:crypto";
import { ReplyError } from "ioredis";
import type { Logger } from "pino";
import { v7 as uuidv7 } from "uuid";
import { describeError } from "../clickhouse/classify-error.js";
import { rowsJson } from "../clickhouse/rows-json.js";
import { type ReportRow, reportIdOf } from "../report/report-schema.js";
import { DataError, insertIsolating } from "./bisecting-insert.js";
import type { HeldJob, Manifest, ManifestStore } from "./manifest-store.js";
import type { WorkerMetrics } from "./metrics.js";

// Delivering a batch of jobs through manifests (manifest-store.ts): jobs that already belong to a
// manifest go in again with it, byte for byte; the others are claimed as a new manifest, then
// inserted. A job this worker no longer holds is let go; rows ClickHouse refused are isolated and
// dead-lettered; the jobs it holds are settled once their manifest is stored.
//
// A job put back from the failed set (`dlq replay`) is not: its first batch may have landed
// long ago, beyond ClickHouse's deduplication window, and holds other jobs' rows. Its own rows
// that `reports` does not hold yet go in under a token made of their ids, so that a replay
// stores each report at most once whenever it runs, and a replay redelivered mid-insert
// repeats the same insert.

/** One job in hand, with how to settle the BullMQ processor's promise for it. */
export interface Entry<J = unknown> extends HeldJob {
  job: J;
  rows: ReportRow[];
  /** Put back by `dlq replay`: delivered on its own (see above). */
  replay?: boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** The job is held by another worker now (this one stalled past its lock): not ours to finish. */
export class LostJobError extends Error {
  override name = "LostJobError";
}

interface Item {
  row: ReportRow;
  jobId: string;
}

export type Retry = <T>(
  what: string,
  fn: () => Promise<T>,
  isFinal: (e: unknown) => boolean,
) => Promise<T>;

export interface ManifestDeliveryDeps<J> {
  manifests: ManifestStore;
  /**
   * One insert of rows with a token, retried until done; throws DataError when refused. `json`
   * is the rows' rowsJson when the manifest has it; `started` is called once, as the first
   * attempt gets its insert slot.
   */
  insert: (rows: ReportRow[], token: string, json?: Buffer, started?: () => void) => Promise<void>;
  /** Which of these rows' report ids ClickHouse holds already. */
  stored: (rows: ReportRow[]) => Promise<Set<string>>;
  retry: Retry;
  deadLetter: (job: J, rows: ReportRow[], reason: string) => Promise<void>;
  onStored?: (manifest: Manifest) => Promise<void>;
  /** Told as a manifest's insert starts, in its insert slot (ingest-processor.ts). */
  onInserting?: (manifest: Manifest) => void;
  /** How long a batch waits for replicas before an error is logged (default 30 s). */
  replicaWaitWarnMs?: number;
  logger: Logger;
  metrics: WorkerMetrics;
}

export function createManifestDelivery<J>(deps: ManifestDeliveryDeps<J>) {
  const { metrics, logger, retry } = deps;
  type E = Entry<J>;
  const insert = (items: Item[], token: string, json?: Buffer, started?: () => void) =>
    deps.insert(
      items.map((i) => i.row),
      token,
      json,
      started,
    );

  /**
   * Manifest operations retry what passes (Redis down, loading, busy, out of memory) and give up
   * on what cannot: a script error, a key of the wrong type, a manifest that does not parse.
   */
  const cannotPass = (e: unknown) =>
    e instanceof SyntaxError ||
    (e instanceof ReplyError && /^(ERR|WRONGTYPE)\b/.test((e as Error).message));

  /**
   * No insert before its manifest is on the replicas (REDIS_ACK_REPLICAS): a primary that failed
   * over to a replica without it would hand the jobs out again with no manifest, and they would
   * be inserted under a new token, a second time. True when the insert may go; false when a
   * failover took the claim away: the jobs are let go, to come back from the queue.
   */
  async function replicated(token: string, held: E[]): Promise<boolean> {
    // A primary without replicas (its replica promoted in its place, none back yet) holds the
    // batch for as long as that lasts: inserting it unreplicated would count it twice if this
    // primary failed too. Said loudly: a gauge while it waits, an error after a while.
    metrics.awaitingReplicas.inc();
    const loud = setTimeout(
      () =>
        logger.error(
          { token, jobs: held.length, waitedMs: deps.replicaWaitWarnMs },
          "batch held from ClickHouse: its manifest is on fewer replicas than REDIS_ACK_REPLICAS; it goes in once a replica is back (see docs/operations.md: a shard without a replica)",
        ),
      deps.replicaWaitWarnMs ?? 30_000,
    );
    loud.unref();
    let gone: string[];
    try {
      gone = await retry(
        "manifest replication",
        () =>
          deps.manifests.replicated(
            token,
            held.map((e) => e.id),
          ),
        cannotPass,
      );
    } finally {
      clearTimeout(loud);
      metrics.awaitingReplicas.dec();
    }
    if (gone.length === 0) return true;
    for (const e of held) loseJob(e);
    return false;
  }

  /** A redelivered job: its manifest is inserted again, exactly as it was the first time. */
  async function reinsert(token: string, held: E[], closedAt: number): Promise<void> {
    metrics.manifestsReinserted.inc();
    const manifest = await retry("manifest read", () => deps.manifests.get(token), cannotPass);
    // Gone: every job of it was completed, these too, by whoever held them after us.
    if (!manifest) for (const e of held) loseJob(e);
    else if (await replicated(token, held)) await insertManifest(manifest, held, closedAt);
  }

  /** The stored part of a manifest (without rows ClickHouse refused) to the onStored hook. */
  async function notifyStored(
    onStored: (m: Manifest) => Promise<void>,
    manifest: Manifest,
    refused: [Item, unknown][] | null,
  ) {
    let stored = manifest;
    if (refused) {
      const bad = new Set(refused.map(([item]) => item.row));
      stored = {
        token: manifest.token,
        jobs: manifest.jobs,
        rows: manifest.rows.filter((r) => !bad.has(r)),
      };
    }
    await retry("stored hook", () => onStored(stored), cannotPass);
  }

  /**
   * A worker that stalled can be handed its own job again (a new lock) while the old delivery is
   * still pending: only the newest is this worker's; the older one lets go.
   */
  function newestOfEach(batch: E[]): E[] {
    const newest = new Map<string, E>();
    for (const e of batch) {
      const seen = newest.get(e.id);
      if (seen) loseJob(seen);
      newest.set(e.id, e);
    }
    return newest.size === batch.length ? batch : [...newest.values()];
  }

  function loseJob(entry: E) {
    metrics.jobsLost.inc();
    entry.reject(new LostJobError(`job ${entry.id} is held by another worker now`));
  }

  /**
   * Inserts a manifest's rows with its token; then settles the jobs this worker holds. `closedAt`:
   * when its batch was made (performance.now()), for the `inserted` stage.
   */
  async function insertManifest(manifest: Manifest, held: E[], closedAt: number): Promise<void> {
    const items: Item[] = [];
    let i = 0;
    for (const [jobId, count] of manifest.jobs) {
      for (const row of manifest.rows.slice(i, i + count)) items.push({ row, jobId });
      i += count;
    }
    // Splitting a refused batch inserts its halves under tokens of their own: only a worker that
    // still holds its jobs may do that, or the halves could land beside the whole batch inserted
    // by the jobs' new holder.
    // The whole batch's insert tells onInserting once it has a slot: read ahead earlier, with
    // other batches' inserts waiting in front, its copies would change under it more often.
    const started = () => deps.onInserting?.(manifest);
    const insertOrSplit = async (part: Item[], token: string) => {
      try {
        const whole = part === items;
        await insert(part, token, whole ? manifest.json : undefined, whole ? started : undefined);
      } catch (err) {
        if (err instanceof DataError && token === manifest.token) {
          const lost = await retry("lock check", () => deps.manifests.lost(held), cannotPass);
          if (lost.length > 0) throw new LostJobError(`jobs ${lost.join(", ")} are held elsewhere`);
        }
        throw err;
      }
    };
    const refused =
      items.length > 0
        ? await insertIsolating(items, manifest.token, insertOrSplit, () =>
            metrics.failures.inc({ kind: "data" }),
          )
        : [];
    metrics.stageSeconds.observe({ stage: "inserted" }, (performance.now() - closedAt) / 1000);
    metrics.batchRows.observe(items.length);
    metrics.rowsInserted.inc(items.length - refused.length);
    metrics.markInserted();
    if (deps.onStored) {
      await notifyStored(deps.onStored, manifest, refused.length > 0 ? refused : null);
    }

    const byJob = new Map<string, { rows: ReportRow[]; reason: string }>();
    for (const [item, cause] of refused) {
      const e = byJob.get(item.jobId) ?? { rows: [], reason: describeError(cause) };
      e.rows.push(item.row);
      byJob.set(item.jobId, e);
    }
    for (const entry of held) {
      const bad = byJob.get(entry.id);
      if (bad) await deadLetter(entry, bad.rows, bad.reason);
      else entry.resolve();
    }
  }

  async function deadLetter(entry: E, rows: ReportRow[], reason: string) {
    try {
      await deps.deadLetter(entry.job, rows, reason);
      metrics.deadLettered.inc(rows.length);
      logger.error({ jobId: entry.id, rows: rows.length, reason }, "rows dead-lettered");
      entry.resolve();
    } catch (err) {
      // The job fails this attempt and comes back; its good rows are then found stored.
      entry.reject(new Error(`could not dead-letter refused rows: ${describeError(err)}`));
    }
  }

  /** A replayed job: its rows not yet stored, under a token of their own. */
  async function replay(entry: E, closedAt: number): Promise<void> {
    const stored = await retry(
      "stored check",
      () => deps.stored(entry.rows),
      () => false,
    );
    const missing = entry.rows.filter((r) => !stored.has(reportIdOf(r)));
    metrics.replayedRows.inc({ outcome: "stored" }, missing.length);
    metrics.replayedRows.inc({ outcome: "already_stored" }, entry.rows.length - missing.length);
    logger.info(
      { jobId: entry.id, rows: entry.rows.length, missing: missing.length },
      "replayed job: inserting the rows not yet stored",
    );
    if (missing.length === 0) return entry.resolve();
    const digest = createHash("sha256").update(missing.map(reportIdOf).join(",")).digest("hex");
    const manifest: Manifest = {
      token: `replay-${digest.slice(0, 32)}`,
      rows: missing,
      jobs: [[entry.id, missing.length]],
    };
    await insertManifest(manifest, [{ ...entry, rows: missing }], closedAt);
  }

  return async function deliver(batch: E[]): Promise<void> {
    const closedAt = performance.now();
    for (const e of batch) if (e.replay) await replay(e, closedAt);
    let left = newestOfEach(batch.filter((e) => !e.replay));
    while (left.length > 0) {
      // Jobs that already belong to a manifest go in again with it; the others get a new one.
      const ids = left.map((e) => e.id);
      const owners = await retry("manifest lookup", () => deps.manifests.owners(ids), cannotPass);
      const byToken = new Map<string, E[]>();
      for (const e of left) {
        const token = owners.get(e.id);
        if (token) byToken.set(token, [...(byToken.get(token) ?? []), e]);
      }
      for (const [token, held] of byToken) await reinsert(token, held, closedAt);
      const fresh = left.filter((e) => !owners.has(e.id));
      if (fresh.length === 0) return;
      const rows = fresh.flatMap((e) => e.rows);
      const manifest: Manifest = {
        token: uuidv7(),
        rows,
        jobs: fresh.map((e) => [e.id, e.rows.length]),
        json: rowsJson(rows),
      };
      const claim = await retry(
        "manifest claim",
        () => deps.manifests.claim(manifest, fresh),
        cannotPass,
      );
      if (claim.claimed) {
        if (await replicated(manifest.token, fresh)) {
          await insertManifest(manifest, fresh, closedAt);
        }
        return;
      }
      // Some jobs were taken over or claimed meanwhile: drop the lost ones, adopt the others.
      const lost = new Set(claim.lost);
      for (const e of fresh) if (lost.has(e.id)) loseJob(e);
      left = fresh.filter((e) => !lost.has(e.id));
    }
  };
}
