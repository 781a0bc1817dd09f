import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { startRedisServer } from "../../../src/local/redis-server.js";
import { keySlot } from "../../../src/redis/key-slot.js";
import { freePorts } from "../free-ports.js";
import { pollUntil } from "./poll-until.js";
import {
  assertHealthy,
  type ClusterView,
  parseClusterNodes,
  promotedOwner,
  type SlotRange,
} from "./redis-cluster-view.js";
import { withRedis } from "./redis-probe.js";
import {
  type RedisNode,
  redisNode,
  redisProcesses,
  topologyDir,
  withAuth,
} from "./redis-processes.js";

// A local Redis Cluster of redis-server processes on free ports (3 primaries with a replica each
// by default), formed by `redis-cli --cluster create`, for the failover tests and the benchmark.
// A short cluster-node-timeout makes a failover take seconds. No persistence: a node restarted
// after its replica was promoted comes back empty, as a replica of the promoted node, and copies
// its data (restarting a primary that has NOT been failed over would bring it back empty and
// still owning its slots: the tests restart a primary only after waitForPromotion).

export interface RedisClusterOptions {
  primaries?: number;
  replicasPerPrimary?: number;
  password?: string;
  /** cluster-node-timeout: a primary unreachable this long is failed over. */
  nodeTimeoutMs?: number;
  /** Where the nodes' directories go; by default a temp dir that stop() removes. */
  dir?: string;
  /** Bound on each wait of the harness (forming, promotion, a restarted node rejoining). */
  timeoutMs?: number;
}

export interface ClusterNode extends RedisNode {
  /** The cluster's id of the node: kept in its nodes.conf, so the same after a restart. */
  id: string;
}

export interface RedisCluster {
  nodes: ClusterNode[];
  /** The nodes as REDIS_CLUSTER_NODES lists them: "host:port,host:port,…". */
  seeds: string;
  password: string | undefined;
  /** Headroom's settings for this cluster (the password in the first seed, as a URL). */
  env: { REDIS_CLUSTER_NODES: string };
  /** The primary serving a slot or a key's slot, as a running node sees the cluster now. */
  primaryOf(slotOrKey: number | string): Promise<ClusterNode>;
  /** The replicas of `primary`, as a running node sees the cluster now. */
  replicasOf(primary: ClusterNode): Promise<ClusterNode[]>;
  /** The first of replicasOf(primary); throws when it has none. */
  replicaOf(primary: ClusterNode): Promise<ClusterNode>;
  isRunning(node: ClusterNode): boolean;
  /** SIGKILL; a primary's slots are noted first, for waitForPromotion. */
  kill(node: ClusterNode): Promise<void>;
  /**
   * SIGSTOP: the node hangs (to the others, as if cut off) until resume() (SIGCONT); a primary's
   * slots are noted first, for waitForPromotion.
   */
  pause(node: ClusterNode): Promise<void>;
  resume(node: ClusterNode): void;
  /** Starts a killed node on its port with its nodes.conf; resolves once the cluster is healthy. */
  restart(node: ClusterNode): Promise<void>;
  /**
   * Resolves with the node that took over the slots of the killed (or paused) `oldPrimary`, once
   * every other running node sees it as their primary and says cluster_state:ok.
   */
  waitForPromotion(oldPrimary: ClusterNode): Promise<ClusterNode>;
  /** Resolves once every running node agrees on one healthy cluster (see assertHealthy). */
  waitForHealthy(): Promise<void>;
  stop(): Promise<void>;
}

/** Default of cluster-node-timeout: failures are seen in a second, not Redis's default 15. */
export const CLUSTER_NODE_TIMEOUT_MS = 1_000;

export class RedisCliMissingError extends Error {
  override name = "RedisCliMissingError";
  constructor() {
    super(
      "redis-cli was not found on PATH; it forms the local cluster. Install it with Redis 7 (Debian/Ubuntu: apt-get install -y redis-tools; macOS: brew install redis).",
    );
  }
}

export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisCluster> {
  const primaries = opts.primaries ?? 3;
  const replicasPerPrimary = opts.replicasPerPrimary ?? 1;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  if (spawnSync("redis-cli", ["--version"], { stdio: "ignore" }).status !== 0) {
    throw new RedisCliMissingError();
  }
  const { dir, removeOnStop } = topologyDir(opts.dir, "headroom-redis-cluster-");
  const processes = redisProcesses(removeOnStop);
  const count = primaries * (1 + replicasPerPrimary);
  /** The slots of primaries killed or paused, for waitForPromotion. */
  const slotsLost = new Map<string, SlotRange[]>();
  const noteSlots = async (node: ClusterNode) => {
    const entry = (await view()).find((e) => e.id === node.id);
    if (entry?.flags.has("master") && entry.slots.length > 0) slotsLost.set(node.id, entry.slots);
  };

  const startNode = async ([port, busPort]: [number, number]): Promise<RedisNode> => {
    const node = redisNode(port, opts.password);
    const args = [
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      "nodes.conf",
      "--cluster-port",
      String(busPort),
      "--cluster-node-timeout",
      String(opts.nodeTimeoutMs ?? CLUSTER_NODE_TIMEOUT_MS),
      ...(opts.password ? ["--masterauth", opts.password] : []),
    ];
    const start = () =>
      startRedisServer({
        dir: join(dir, `node-${port}`),
        port,
        appendonly: false,
        args,
        ...(opts.password ? { password: opts.password } : {}),
      });
    return processes.add(node, start);
  };

  const view = async (): Promise<ClusterView> => {
    for (const node of nodes.filter((n) => processes.isRunning(n) && !processes.isPaused(n))) {
      const text = await withRedis(node.url, (r) => r.call("CLUSTER", "NODES")).catch(() => null);
      if (typeof text === "string") return parseClusterNodes(text);
    }
    throw new Error("no node of the cluster answers");
  };
  const byId = (id: string) => {
    const node = nodes.find((n) => n.id === id);
    if (!node) throw new Error(`node ${id} is not one of ours`);
    return node;
  };
  const healthy = () =>
    assertHealthy(
      nodes.filter((n) => processes.isRunning(n)),
      nodes.length,
    );

  let nodes: ClusterNode[] = [];
  try {
    // Two ports a node: clients', and the cluster bus's.
    const ports = await freePorts(2 * count);
    const started = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        startNode([ports[2 * i] ?? 0, ports[2 * i + 1] ?? 0]),
      ),
    );
    nodes = await Promise.all(
      started.map(async (n) => ({
        ...n,
        id: String(await withRedis(n.url, (r) => r.call("CLUSTER", "MYID"))),
      })),
    );
    await createCluster(nodes, replicasPerPrimary, opts.password, timeoutMs);
    await pollUntil("cluster formed", healthy, { timeoutMs });
  } catch (err) {
    await processes.stop();
    throw err;
  }

  const primaryOf = async (slotOrKey: number | string) => {
    const slot = typeof slotOrKey === "number" ? slotOrKey : keySlot(slotOrKey);
    const owner = (await view()).find(
      (e) => e.flags.has("master") && e.slots.some(([a, b]) => a <= slot && slot <= b),
    );
    if (!owner) throw new Error(`no primary serves slot ${slot}`);
    return byId(owner.id);
  };
  const replicasOf = async (primary: ClusterNode) =>
    (await view()).filter((e) => e.masterId === primary.id).map((e) => byId(e.id));

  return {
    nodes,
    seeds: nodes.map((n) => n.address).join(","),
    password: opts.password,
    env: { REDIS_CLUSTER_NODES: withAuth(nodes, opts.password) },
    primaryOf,
    replicasOf,
    async replicaOf(primary) {
      const [replica] = await replicasOf(primary);
      if (!replica) throw new Error(`${primary.address} has no replica`);
      return replica;
    },
    isRunning: (node) => processes.isRunning(node),
    async kill(node) {
      await noteSlots(node);
      await processes.kill(node);
    },
    async pause(node) {
      await noteSlots(node);
      processes.pause(node);
    },
    resume: (node) => processes.resume(node),
    async restart(node) {
      await processes.restart(node);
      await pollUntil(`${node.address} back in the cluster`, healthy, { timeoutMs });
    },
    async waitForPromotion(oldPrimary) {
      const slots = slotsLost.get(oldPrimary.id);
      if (!slots) throw new Error(`${oldPrimary.address} was not a primary killed or paused`);
      const survivors = nodes.filter(
        (n) => n.id !== oldPrimary.id && processes.isRunning(n) && !processes.isPaused(n),
      );
      const promoted = await pollUntil(
        `a replica of ${oldPrimary.address} promoted`,
        async () => {
          const owners = await Promise.all(
            survivors.map((n) => withRedis(n.url, (r) => promotedOwner(r, oldPrimary.id, slots))),
          );
          const first = owners[0];
          if (!first || owners.some((o) => o !== first)) {
            throw new Error(`the survivors disagree: ${owners.join(", ")}`);
          }
          return byId(first);
        },
        { timeoutMs },
      );
      slotsLost.delete(oldPrimary.id);
      return promoted;
    },
    waitForHealthy: () => pollUntil("cluster healthy", healthy, { timeoutMs }).then(() => {}),
    stop: () => processes.stop(),
  };
}

async function createCluster(
  nodes: ClusterNode[],
  replicasPerPrimary: number,
  password: string | undefined,
  timeoutMs: number,
) {
  const args = [
    "--cluster",
    "create",
    ...nodes.map((n) => n.address),
    "--cluster-replicas",
    String(replicasPerPrimary),
    "--cluster-yes",
  ];
  const out: Buffer[] = [];
  const child = spawn("redis-cli", args, {
    stdio: ["ignore", "pipe", "pipe"],
    // Not `-a`: redis-cli warns that a password on the command line is unsafe.
    env: { ...process.env, ...(password ? { REDISCLI_AUTH: password } : {}) },
  });
  child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
  child.stderr.on("data", (chunk: Buffer) => out.push(chunk));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (c) => resolve(c));
  }).finally(() => clearTimeout(timer));
  if (code !== 0) {
    throw new Error(`redis-cli --cluster create failed (${code}):\n${Buffer.concat(out)}`);
  }
}
