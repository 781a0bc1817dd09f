import type { Config } from "../config.js";

// Where Redis is: one server (REDIS_URL), a Cluster (REDIS_CLUSTER_NODES) or a primary watched by
// Sentinels (REDIS_SENTINELS + REDIS_SENTINEL_NAME). Every process builds its clients from this,
// so edge, workers, CLI and local stack work alike on each.

export interface RedisNode {
  host: string;
  port: number;
}

/** Credentials and TLS of the data nodes (not the sentinels'). */
export interface RedisAuth {
  username?: string;
  password?: string;
  tls: boolean;
}

export type RedisTopology =
  | { kind: "standalone"; url: string }
  | { kind: "cluster"; nodes: RedisNode[]; auth: RedisAuth }
  | {
      kind: "sentinel";
      sentinels: RedisNode[];
      name: string;
      auth: RedisAuth;
      sentinelPassword?: string;
    };

type TopologyConfig = Pick<
  Config,
  | "REDIS_URL"
  | "REDIS_CLUSTER_NODES"
  | "REDIS_SENTINELS"
  | "REDIS_SENTINEL_NAME"
  | "REDIS_SENTINEL_PASSWORD"
>;

function parseNode(entry: string): { node: RedisNode; auth: RedisAuth | null } {
  if (/^rediss?:\/\//.test(entry)) {
    const url = new URL(entry);
    const auth: RedisAuth = { tls: url.protocol === "rediss:" };
    if (url.username) auth.username = decodeURIComponent(url.username);
    if (url.password) auth.password = decodeURIComponent(url.password);
    return { node: { host: url.hostname, port: Number(url.port || 6379) }, auth };
  }
  const at = entry.lastIndexOf(":");
  return {
    node: { host: entry.slice(0, at).replace(/^\[|\]$/g, ""), port: Number(entry.slice(at + 1)) },
    auth: null,
  };
}

/** Nodes and, from the first entry written as a URL, the credentials and TLS they all share. */
function parseNodes(entries: string[]): { nodes: RedisNode[]; auth: RedisAuth } {
  const parsed = entries.map(parseNode);
  const auth = parsed.find((p) => p.auth)?.auth ?? { tls: false };
  return { nodes: parsed.map((p) => p.node), auth };
}

export function redisTopology(config: TopologyConfig): RedisTopology {
  if (config.REDIS_CLUSTER_NODES) {
    return { kind: "cluster", ...parseNodes(config.REDIS_CLUSTER_NODES) };
  }
  if (config.REDIS_SENTINELS && config.REDIS_SENTINEL_NAME) {
    const { nodes, auth } = parseNodes(config.REDIS_SENTINELS);
    return {
      kind: "sentinel",
      sentinels: nodes,
      name: config.REDIS_SENTINEL_NAME,
      auth,
      ...(config.REDIS_SENTINEL_PASSWORD && { sentinelPassword: config.REDIS_SENTINEL_PASSWORD }),
    };
  }
  return { kind: "standalone", url: config.REDIS_URL };
}

/** For logs and error messages: where Redis was looked for, without secrets. */
export function describeTopology(topology: RedisTopology): string {
  const list = (nodes: RedisNode[]) => nodes.map((n) => `${n.host}:${n.port}`).join(",");
  switch (topology.kind) {
    case "standalone":
      return redactUrl(topology.url);
    case "cluster":
      return `cluster ${list(topology.nodes)}`;
    case "sentinel":
      return `sentinel ${topology.name}@${list(topology.sentinels)}`;
  }
}

/** Redacts the password of a redis:// URL for logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(invalid url)";
  }
}
