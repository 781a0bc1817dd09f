import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type ChildServer, childServer, waitUntilUp } from "../../../src/local/child-process.js";
import {
  answersPing,
  hasRedisServer,
  RedisServerMissingError,
  startRedisServer,
} from "../../../src/local/redis-server.js";
import { freePorts } from "../free-ports.js";
import { pollUntil } from "./poll-until.js";
import { assertReplicaLinked, role, withRedis } from "./redis-probe.js";
import {
  type RedisNode,
  redisNode,
  redisProcesses,
  topologyDir,
  withAuth,
} from "./redis-processes.js";

// A local Sentinel deployment: a primary, its replica(s) and sentinels (`redis-server <conf>
// --sentinel`), on free ports, for the failover tests. A primary unreachable for a second is
// failed over. No persistence; as with the cluster, a primary is restarted only after its
// failover (an empty primary coming back before it would replicate its emptiness).

export interface RedisSentinelOptions {
  /** The monitored primary's name: REDIS_SENTINEL_NAME. */
  name?: string;
  replicas?: number;
  sentinels?: number;
  /** Sentinels that must agree a primary is down; a majority of them by default. */
  quorum?: number;
  /** The data nodes' password (the sentinels have none). */
  password?: string;
  /** down-after-milliseconds: how long the primary may be unreachable before it is failed over. */
  downAfterMs?: number;
  /** Where the nodes' directories go; by default a temp dir that stop() removes. */
  dir?: string;
  /** Bound on each wait of the harness (settling, failover, a restarted node rejoining). */
  timeoutMs?: number;
}

export interface RedisSentinel {
  name: string;
  /** The sentinels as REDIS_SENTINELS lists them: "host:port,host:port,…". */
  sentinels: string;
  sentinelNodes: RedisNode[];
  /** The data nodes: the first primary, then its replicas. */
  nodes: RedisNode[];
  password: string | undefined;
  /** Headroom's settings for this deployment (the data nodes' password in the first sentinel). */
  env: { REDIS_SENTINELS: string; REDIS_SENTINEL_NAME: string };
  /** The primary, as the first answering sentinel names it. */
  primary(): Promise<RedisNode>;
  isRunning(node: RedisNode): boolean;
  /** SIGKILL of a data node or a sentinel. */
  kill(node: RedisNode): Promise<void>;
  /**
   * SIGSTOP and SIGCONT: a node that hangs (to the others, as if cut off), then wakes up. A
   * primary failed over while it hung wakes up as a primary still (its clients can write to it)
   * until the sentinels demote it: about 20 s here.
   */
  pause(node: RedisNode): Promise<void>;
  resume(node: RedisNode): void;
  /**
   * Starts a killed node on its port with its directory (a sentinel with its own config file) and
   * resolves once the deployment is healthy again: a former primary as a replica of the current
   * one, with its link up.
   */
  restart(node: RedisNode): Promise<void>;
  /**
   * Resolves with the new primary once every running sentinel names a node other than
   * `oldPrimary` and that node answers ROLE as a primary.
   */
  waitForFailover(oldPrimary: RedisNode): Promise<RedisNode>;
  /** Resolves once every running sentinel sees the primary up, every running replica and sentinel. */
  waitForHealthy(): Promise<void>;
  stop(): Promise<void>;
}

export const SENTINEL_DOWN_AFTER_MS = 1_000;

export async function startRedisSentinel(opts: RedisSentinelOptions = {}): Promise<RedisSentinel> {
  if (!hasRedisServer()) throw new RedisServerMissingError();
  const name = opts.name ?? "headroom";
  const replicaCount = opts.replicas ?? 1;
  const sentinelCount = opts.sentinels ?? 3;
  const quorum = opts.quorum ?? Math.floor(sentinelCount / 2) + 1;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const { dir, removeOnStop } = topologyDir(opts.dir, "headroom-redis-sentinel-");
  const processes = redisProcesses(removeOnStop);
  const password = opts.password ? { password: opts.password } : {};

  const addDataNode = async (port: number, replicaOf?: RedisNode) => {
    const node = redisNode(port, opts.password);
    let primaryUrl = replicaOf?.url;
    // The sentinels reconfigure a server with REPLICAOF and CONFIG REWRITE (which fails, without
    // a config file: harmless); restart() starts it as a replica of the primary of the moment.
    const start = () =>
      startRedisServer({
        dir: join(dir, `node-${port}`),
        port,
        appendonly: false,
        ...password,
        ...(primaryUrl ? { replicaOf: primaryUrl } : {}),
      });
    await processes.add(node, start);
    return {
      node,
      setPrimary(primary: RedisNode | undefined) {
        primaryUrl = primary && primary.port !== port ? primary.url : undefined;
      },
    };
  };

  let dataNodes: Awaited<ReturnType<typeof addDataNode>>[] = [];
  let sentinelNodes: RedisNode[] = [];

  const askSentinels = async <T>(fn: (sentinel: RedisNode) => Promise<T>) =>
    Promise.all(
      sentinelNodes.filter((s) => processes.isRunning(s) && !processes.isPaused(s)).map(fn),
    );
  const primaryAddress = (sentinel: RedisNode) =>
    withRedis(sentinel.url, async (r) => {
      const reply = (await r.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)) as string[] | null;
      if (!reply) throw new Error(`${sentinel.address} does not know ${name}`);
      return `${reply[0]}:${reply[1]}`;
    });
  const dataNodeAt = (address: string) => {
    const found = dataNodes.find((d) => d.node.address === address)?.node;
    if (!found) throw new Error(`${address} is not one of our data nodes`);
    return found;
  };
  const healthy = async () => {
    const [address, ...others] = await askSentinels(primaryAddress);
    if (address === undefined) throw new Error("no sentinel runs");
    if (others.some((a) => a !== address)) throw new Error("the sentinels disagree");
    const primary = dataNodeAt(address);
    if (!processes.isRunning(primary)) throw new Error(`the primary ${address} is down`);
    const replicas = dataNodes.map((d) => d.node).filter((n) => n !== primary);
    const running = replicas.filter((n) => processes.isRunning(n));
    for (const replica of running) await assertReplicaLinked(replica.url, primary.port);
    const sentinelsRunning = sentinelNodes.filter((s) => processes.isRunning(s)).length;
    await askSentinels((s) =>
      withRedis(s.url, async (r) => {
        const master = pairs((await r.call("SENTINEL", "MASTER", name)) as string[]);
        if (master.get("flags") !== "master") {
          throw new Error(`${s.address} sees the primary as ${master.get("flags")}`);
        }
        const seen = ((await r.call("SENTINEL", "REPLICAS", name)) as string[][]).map(pairs);
        for (const replica of running) {
          const entry = seen.find((e) => e.get("port") === String(replica.port));
          if (entry?.get("flags") !== "slave" || entry.get("master-link-status") !== "ok") {
            throw new Error(`${s.address} sees ${replica.address} as ${entry?.get("flags")}`);
          }
        }
        const peers = ((await r.call("SENTINEL", "SENTINELS", name)) as string[][]).map(pairs);
        const up = peers.filter((p) => p.get("flags") === "sentinel").length;
        if (up < sentinelsRunning - 1) throw new Error(`${s.address} sees ${up} other sentinels`);
      }),
    );
    return true;
  };

  const addSentinel = async (port: number, primary: RedisNode) => {
    const node = redisNode(port);
    const sentinelDir = join(dir, `sentinel-${port}`);
    mkdirSync(sentinelDir, { recursive: true });
    // Sentinel rewrites its config file (its id, the replicas and sentinels it found, the
    // current primary): each has its own, and a restart reads what it last wrote.
    const conf = join(sentinelDir, "sentinel.conf");
    writeFileSync(
      conf,
      [
        `port ${port}`,
        "bind 127.0.0.1",
        "daemonize no",
        `dir ${sentinelDir}`,
        `sentinel monitor ${name} ${primary.host} ${primary.port} ${quorum}`,
        `sentinel down-after-milliseconds ${name} ${opts.downAfterMs ?? SENTINEL_DOWN_AFTER_MS}`,
        // Also how long a sentinel waits before trying again a failover that another one
        // started and did not finish.
        `sentinel failover-timeout ${name} 2000`,
        `sentinel parallel-syncs ${name} 1`,
        ...(opts.password ? [`sentinel auth-pass ${name} ${JSON.stringify(opts.password)}`] : []),
        "",
      ].join("\n"),
    );
    return processes.add(node, () => startSentinelProcess(conf, node));
  };

  try {
    const [firstPort = 0, ...ports] = await freePorts(1 + replicaCount + sentinelCount);
    const first = await addDataNode(firstPort);
    const replicas = await Promise.all(
      ports.slice(0, replicaCount).map((port) => addDataNode(port, first.node)),
    );
    dataNodes = [first, ...replicas];
    // Each sentinel is told of the primary only: it finds the replicas and the other sentinels.
    sentinelNodes = await Promise.all(
      ports.slice(replicaCount).map((port) => addSentinel(port, first.node)),
    );
    await pollUntil("sentinel deployment settled", healthy, { timeoutMs });
  } catch (err) {
    await processes.stop();
    throw err;
  }

  const primary = async () => {
    const [address] = await askSentinels(primaryAddress);
    if (address === undefined) throw new Error("no sentinel runs");
    return dataNodeAt(address);
  };

  return {
    name,
    sentinels: sentinelNodes.map((s) => s.address).join(","),
    sentinelNodes,
    nodes: dataNodes.map((d) => d.node),
    password: opts.password,
    env: { REDIS_SENTINELS: withAuth(sentinelNodes, opts.password), REDIS_SENTINEL_NAME: name },
    primary,
    isRunning: (node) => processes.isRunning(node),
    kill: (node) => processes.kill(node),
    pause: async (node) => processes.pause(node),
    resume: (node) => processes.resume(node),
    async restart(node) {
      const data = dataNodes.find((d) => d.node === node);
      // A former primary comes back as a replica of the current one, as an operator would bring
      // it back: left to come back as a primary, it is demoted by the sentinels only after about
      // 20 s here (they wait for its role to be stable), against 5 s this way.
      // The primary every running sentinel names: one sentinel not yet caught up with a
      // failover would name the node itself, which would then come back as a second primary.
      if (data) {
        const agreed = await pollUntil(
          "the sentinels agreeing on the primary",
          async () => {
            const addresses = new Set(await askSentinels(primaryAddress));
            const [address] = addresses;
            if (addresses.size !== 1 || address === undefined) {
              throw new Error(`the sentinels name ${[...addresses].join(", ") || "none"}`);
            }
            return dataNodeAt(address);
          },
          { timeoutMs },
        );
        data.setPrimary(agreed);
      }
      await processes.restart(node);
      await pollUntil(`${node.address} back`, healthy, { timeoutMs });
    },
    async waitForFailover(oldPrimary) {
      return pollUntil(
        `failover from ${oldPrimary.address}`,
        async () => {
          const addresses = new Set(await askSentinels(primaryAddress));
          const [address] = addresses;
          if (addresses.size !== 1 || address === undefined) {
            throw new Error(`the sentinels name ${[...addresses].join(", ") || "none"}`);
          }
          if (address === oldPrimary.address) throw new Error("still the old primary");
          const promoted = dataNodeAt(address);
          const answer = await withRedis(promoted.url, role);
          if (answer !== "master") throw new Error(`${address} answers ROLE ${answer}`);
          return promoted;
        },
        { timeoutMs },
      );
    },
    waitForHealthy: () => pollUntil("sentinel healthy", healthy, { timeoutMs }).then(() => {}),
    stop: () => processes.stop(),
  };
}

async function startSentinelProcess(conf: string, node: RedisNode): Promise<ChildServer> {
  const child = spawn("redis-server", [conf, "--sentinel"], { stdio: "ignore" });
  await waitUntilUp(child, `sentinel on ${node.address}`, () => answersPing(node.url), 10_000);
  return childServer(child, node.url, node.port);
}

/** A flat [field, value, field, value, …] reply of SENTINEL MASTER/REPLICAS/SENTINELS. */
function pairs(flat: string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(String(flat[i]), String(flat[i + 1]));
  return map;
}
