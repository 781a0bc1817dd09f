import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { createEdge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";
import { type RedisCluster, startRedisCluster } from "../helpers/redis-topology/redis-cluster.js";
import { withRedis } from "../helpers/redis-topology/redis-probe.js";
import { startRedisReplica } from "../helpers/redis-topology/redis-replica.js";
import { startRespCutProxy } from "../helpers/resp-cut-proxy.js";
import {
  brief,
  type Kind,
  post,
  resendAdvised,
  runCase,
  storedPerView,
  untilEdgeReady,
  type WriteOutcomeStack,
} from "../helpers/write-outcome.js";

// The write-outcome properties (write-outcome.ts) where batch.write-outcome.test.ts does not
// reach: the edge's WAIT for a replica (REDIS_ACK_REPLICAS=1) cut before or after Redis took it,
// and a Redis Cluster with the job's add cut on the node that owns the queue's slot.

const quiet = createLogger("silent", "test");
const MODES = ["before", "after"] as const;
const outcomes: string[] = [];

/** One case, its cut and answers kept for the record of this run. */
async function recorded(...args: Parameters<typeof runCase>) {
  const r = await runCase(...args);
  outcomes.push(
    `${args[1]} | ${r.cut} | ${args[4]} | ${r.first.map(brief).join(", ")} | ${r.last.map(brief).join(", ")}`,
  );
  return r.cut;
}

afterAll(() => {
  if (outcomes.length > 0) console.info(outcomes.join("\n"));
});

describe("REDIS_ACK_REPLICAS=1, the connection cut at the WAIT for the replica", () => {
  let dir: string;
  let primary: RedisServer;
  let replica: RedisServer;
  let stack: WriteOutcomeStack;
  let worker: IngestWorker;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "headroom-wo-replica-"));
    primary = await startRedisServer({ dir: join(dir, "primary") });
    replica = await startRedisReplica(primary.url, { dir: join(dir, "replica") });
    const p = await startPipeline({ REDIS_URL: primary.url });
    const proxy = await startRespCutProxy(primary.port);
    const edge = await createEdge(
      loadConfig({
        ...p.env,
        REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
        REDIS_ACK_REPLICAS: "1",
        // Long enough that the replica confirms in time on a loaded machine.
        REDIS_ACK_TIMEOUT_MS: "2000",
        REPORT_ID_PENDING_MS: "1000",
      }),
      quiet,
    );
    stack = { edge, p, proxy };
    worker = startIngestWorker(p, quiet);
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    await stack?.edge.close();
    await stack?.proxy.close();
    await stack?.p.close();
    await replica?.kill();
    await primary?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // Only the job writes WAIT, one per job: the first after arming is this request's.
  const matchWait = () => (args: string[]) => /^wait$/i.test(args[0] ?? "");

  it("a batch with ids cut before the WAIT, its replica paused: no resend is answered duplicate until the replica holds the job", {
    timeout: 60_000,
  }, async () => {
    const { edge, p, proxy } = stack;
    const { key, projectId } = await edge.keyStore.create(`p-wo-${uniqueId()}`, {
      defaultPlan: "unlimited",
    });
    const body = Array.from({ length: 3 }, (_, i) =>
      clientReport({ app: `r${i}`, id: randomUUID() }),
    );
    await untilEdgeReady(edge);
    const pid = replica.process.pid as number;
    process.kill(pid, "SIGSTOP");
    try {
      proxy.arm(matchWait(), 1, "before");
      const first = await post(edge, key, "batch with ids", body);
      expect(proxy.disarm().cut).toMatch(/^WAIT 1\b/i);
      expect(first.every(resendAdvised), JSON.stringify(first)).toBe(true);
      // The queue's connection is back (it refuses commands until then), so the resend's
      // question reaches Redis. Waiting for it is not the claim: a loaded machine may take long.
      await eventually(() => edge.queue.getJobCounts("wait"), { timeoutMs: 30_000 });
      const paused = await post(edge, key, "batch with ids", body);
      expect(paused.every(resendAdvised), `while paused: ${JSON.stringify(paused)}`).toBe(true);
    } finally {
      process.kill(pid, "SIGCONT");
    }
    const answers = await eventually(
      async () => {
        const r = await post(edge, key, "batch with ids", body);
        expect(r.some(resendAdvised), JSON.stringify(r)).toBe(false);
        return r;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(answers.map((r) => r.duplicate)).toEqual([true, true, true]);
    await eventually(
      async () => {
        const stored = await storedPerView(p, projectId);
        for (let i = 0; i < body.length; i++) expect(stored.get(`r${i}`)).toEqual([1, 1, 1, 1]);
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  });

  for (const kind of ["batch with ids", "single report"] satisfies Kind[]) {
    for (const mode of MODES) {
      it(`a ${kind}, cut ${mode} Redis took the WAIT: resent as advised, stored once`, {
        timeout: 60_000,
      }, async () => {
        const cut = await recorded(stack, kind, matchWait, 1, mode);
        expect(cut).toMatch(/^WAIT 1\b/i);
      });
    }
  }
});

describe("a Redis Cluster, the connection cut at the job's add on the queue's node", () => {
  let cluster: RedisCluster;
  let stack: WriteOutcomeStack;
  let worker: IngestWorker;
  let queuePrefix: string;

  beforeAll(async () => {
    cluster = await startRedisCluster({ primaries: 3, replicasPerPrimary: 0 });
    const p: Pipeline = await startPipeline(cluster.env);
    queuePrefix = p.config.QUEUE_PREFIX;
    const owner = await cluster.primaryOf(`${queuePrefix}:${p.config.QUEUE_NAME}:wait`);
    const proxy = await startRespCutProxy(owner.port);
    // The node tells clients (CLUSTER SLOTS, MOVED) to reach it through the proxy, as a node
    // behind NAT announces its public address: the edge's Cluster client follows it unchanged.
    await withRedis(owner.url, (r) => r.config("SET", "cluster-announce-port", String(proxy.port)));
    for (const node of cluster.nodes) {
      await eventually(
        async () => {
          const slots = await withRedis(node.url, (r) => r.cluster("SLOTS"));
          const ports = slots.map((s) => s[2]?.[1]);
          expect(ports, `node ${node.port} sees the proxy`).toContain(proxy.port);
        },
        { timeoutMs: 15_000, intervalMs: 100 },
      );
    }
    const edge = await createEdge(
      loadConfig({ ...p.env, ...cluster.env, REPORT_ID_PENDING_MS: "1000" }),
      quiet,
    );
    stack = { edge, p, proxy };
    worker = startIngestWorker(p, quiet);
  }, 90_000);

  afterAll(async () => {
    await worker?.close();
    await stack?.edge.close();
    await stack?.proxy.close();
    await stack?.p.close();
    await cluster?.stop();
  });

  // The job's add: a script on the queue's keys that carries the project's reports (the claims
  // name the queue's prefix too, but as an argument, not as a key under it).
  const matchJobAdd = (project: string) => (args: string[]) =>
    /^eval/i.test(args[0] ?? "") &&
    args.some((a) => a.startsWith(`${queuePrefix}:`)) &&
    args.some((a) => a.includes(project));

  for (const mode of MODES) {
    it(`a batch with ids, cut ${mode} the queue's node took the job's add: resent as advised, stored once`, {
      timeout: 60_000,
    }, async () => {
      const cut = await recorded(stack, "batch with ids", matchJobAdd, 1, mode);
      // Cut on the proxy: the edge did reach the queue's node through it.
      expect(cut).toMatch(/^EVAL(SHA)? /i);
    });
  }
});
