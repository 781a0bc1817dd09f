import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChildServer, isRunning } from "../../../src/local/child-process.js";

// The processes of a local Redis topology (cluster nodes, a primary and its replicas,
// sentinels): each can be SIGKILLed and started again on its port with its directory, and all
// are stopped together, whatever state a test left them in.

export interface RedisNode {
  host: string;
  port: number;
  /** "host:port", as REDIS_CLUSTER_NODES and REDIS_SENTINELS list them. */
  address: string;
  /** redis://[:password@]host:port */
  url: string;
}

export function redisNode(port: number, password?: string): RedisNode {
  const host = "127.0.0.1";
  const auth = password ? `:${encodeURIComponent(password)}@` : "";
  return { host, port, address: `${host}:${port}`, url: `redis://${auth}${host}:${port}` };
}

/**
 * A node list as Headroom's settings take it (REDIS_CLUSTER_NODES, REDIS_SENTINELS): "host:port,…",
 * the first written as a URL with the data nodes' password when there is one.
 */
export function withAuth(nodes: RedisNode[], password: string | undefined): string {
  const auth = password ? `redis://:${encodeURIComponent(password)}@` : "";
  return nodes.map((n, i) => (i === 0 ? `${auth}${n.address}` : n.address)).join(",");
}

/** How long a server may take to exit on SIGTERM before it gets SIGKILL. */
const STOP_GRACE_MS = 5_000;

export interface RedisProcesses {
  /** Starts a node by `start`, and again by the same `start` on restart. */
  add<N extends RedisNode>(node: N, start: () => Promise<ChildServer>): Promise<N>;
  isRunning(node: RedisNode): boolean;
  /** SIGKILL: the node is gone at once, nothing flushed. */
  kill(node: RedisNode): Promise<void>;
  /**
   * SIGSTOP: the node holds its connections but answers nothing (a hung or partitioned server),
   * until resume() (SIGCONT).
   */
  pause(node: RedisNode): void;
  resume(node: RedisNode): void;
  isPaused(node: RedisNode): boolean;
  /** Starts a killed node again, on its port with its directory. */
  restart(node: RedisNode): Promise<void>;
  /** Stops every node still running (SIGTERM, then SIGKILL), and removes the directory we made. */
  stop(): Promise<void>;
}

export function redisProcesses(removeOnStop: string | undefined): RedisProcesses {
  interface Entry {
    start: () => Promise<ChildServer>;
    server?: ChildServer;
    paused?: boolean;
  }
  const entries = new Map<number, Entry>();
  const entry = (node: RedisNode) => {
    const found = entries.get(node.port);
    if (!found) throw new Error(`${node.address} is not a node of this topology`);
    return found;
  };
  const running = (node: RedisNode) => {
    const server = entry(node).server;
    return server !== undefined && isRunning(server.process);
  };
  return {
    async add(node, start) {
      const e: Entry = { start };
      entries.set(node.port, e);
      e.server = await start();
      return node;
    },
    isRunning: running,
    async kill(node) {
      const e = entry(node);
      await e.server?.kill();
      e.paused = false;
    },
    pause(node) {
      const e = entry(node);
      if (!running(node)) throw new Error(`${node.address} is not running`);
      e.server?.process.kill("SIGSTOP");
      e.paused = true;
    },
    resume(node) {
      const e = entry(node);
      if (running(node)) e.server?.process.kill("SIGCONT");
      e.paused = false;
    },
    isPaused: (node) => running(node) && entry(node).paused === true,
    async restart(node) {
      const e = entry(node);
      if (running(node)) throw new Error(`${node.address} is still running`);
      e.server = await e.start();
    },
    async stop() {
      await Promise.all(
        [...entries.values()].map(async ({ server }) => {
          if (!server || !isRunning(server.process)) return;
          server.process.kill("SIGCONT"); // a paused server would not act on SIGTERM
          const timer = setTimeout(() => void server.kill(), STOP_GRACE_MS);
          await server.stop();
          clearTimeout(timer);
        }),
      );
      if (removeOnStop) rmSync(removeOnStop, { recursive: true, force: true });
    },
  };
}

/** The topology's directory: `dir` when given (kept), else a temp dir removed by stop(). */
export function topologyDir(dir: string | undefined, prefix: string) {
  if (dir) {
    mkdirSync(dir, { recursive: true });
    return { dir, removeOnStop: undefined };
  }
  const made = mkdtempSync(join(tmpdir(), prefix));
  return { dir: made, removeOnStop: made };
}
