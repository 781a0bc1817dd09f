import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import { createReportsQueue, REPORT_JOB } from "../../src/queue/reports-queue.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";
import { createRedisManifestStore } from "../../src/worker/manifest-store.js";
import { sweepManifests } from "../../src/worker/manifest-sweep.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";

// A completion lost in a failover, on a real primary and replica. A worker inserts a batch once
// its manifest is on the replica (REDIS_ACK_REPLICAS=1), completes the job on the primary, and the
// primary fails before passing the completion on. The worker's release of the job then runs on
// the promoted replica (a Cluster client sends it there once the slot moves), which still queues
// the job: released there, the job would come back with no manifest and be inserted under a new
// token, a second time (seen in failover.redis.test.ts). It keeps its manifest instead.

let dir: string;
let primary: RedisServer;
let replica: RedisServer;
let onPrimary: Redis;
let onReplica: Redis;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "headroom-release-"));
  primary = await startRedisServer({ dir: join(dir, "primary") });
  replica = await startRedisServer({ dir: join(dir, "replica") });
  // BullMQ's workers need maxRetriesPerRequest: null.
  onPrimary = new Redis(primary.url, { maxRetriesPerRequest: null });
  onReplica = new Redis(replica.url, { maxRetriesPerRequest: null });
  await onReplica.replicaof("127.0.0.1", primary.port);
  await eventually(
    async () => expect(await onReplica.info("replication")).toMatch(/master_link_status:up/),
    { timeoutMs: 15_000, intervalMs: 100 },
  );
});

afterAll(async () => {
  onPrimary?.disconnect();
  onReplica?.disconnect();
  await replica?.kill();
  await primary?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it("a job completed on a primary that failed over keeps its manifest on the promoted replica", async () => {
  const names = { prefix: `{r-${uniqueId()}}`, name: "reports" };
  const keyPrefix = `${names.prefix}:${names.name}`;
  const queue = createReportsQueue(onPrimary, names);
  const worker = new Worker(names.name, null, {
    connection: onPrimary,
    prefix: names.prefix,
    autorun: false,
  });
  try {
    const rows = [sampleRow(1), sampleRow(2)];
    await queue.add(REPORT_JOB, { v: ROW_SHAPES.current, rows });
    const lockToken = `lock-${uniqueId()}`;
    const job = await worker.getNextJob(lockToken, { block: false });
    if (!job?.id) throw new Error("no job to take");
    const id = job.id;

    // The batch's manifest, claimed on the primary and confirmed on the replica: it may go in.
    const replicated = { ackReplicas: 1, ackTimeoutMs: 5_000 };
    const primaryStore = createRedisManifestStore(onPrimary, keyPrefix, replicated);
    const manifest = {
      token: `batch-${uniqueId()}`,
      rows,
      jobs: [[id, rows.length]] as [string, number][],
    };
    expect(await primaryStore.claim(manifest, [{ id, lockToken }])).toStrictEqual({
      claimed: true,
    });
    expect(await primaryStore.replicated(manifest.token, [id])).toStrictEqual([]);

    // The replica is promoted (the primary is as good as dead to it); the primary completes the
    // job all the same, and the promoted replica never hears of it.
    await onReplica.replicaof("NO", "ONE");
    await job.moveToCompleted(undefined, lockToken, false);
    expect(await onPrimary.exists(`${keyPrefix}:${id}`)).toBe(0);
    expect(await queue.getJobCounts("active")).toStrictEqual({ active: 0 });

    // The worker releases the completed job; its release reaches the promoted replica, and so
    // does a sweep.
    const promotedStore = createRedisManifestStore(onReplica, keyPrefix, replicated);
    await promotedStore.release([id]);
    await sweepManifests(onReplica, keyPrefix, promotedStore);

    // There the job is still active: it keeps its manifest, so whoever takes it next inserts
    // that manifest again, under the same token; a new batch cannot claim it.
    expect(await onReplica.lrange(`${keyPrefix}:active`, 0, -1)).toStrictEqual([id]);
    expect(await promotedStore.owners([id])).toStrictEqual(new Map([[id, manifest.token]]));
    expect(await promotedStore.get(manifest.token)).toStrictEqual(manifest);
    const second = { ...manifest, token: `batch-${uniqueId()}` };
    expect(await promotedStore.claim(second, [{ id, lockToken }])).toStrictEqual({
      claimed: false,
      lost: [],
      owned: new Map([[id, manifest.token]]),
    });

    // Where the job is completed, the same release lets the manifest go.
    await primaryStore.release([id]);
    expect(await primaryStore.owners([id])).toStrictEqual(new Map());
    expect(await primaryStore.get(manifest.token)).toBeNull();
  } finally {
    await worker.close();
    await queue.close();
  }
});
