import type { Redis } from "ioredis";
import { info, parseInfo, withRedis } from "./redis-probe.js";
import type { RedisNode } from "./redis-processes.js";

// How the nodes of a local Redis Cluster see it (CLUSTER NODES, CLUSTER INFO), and the conditions
// the harness of redis-cluster.ts waits for: a healthy cluster, a promotion.

export type SlotRange = [number, number];

export interface ClusterViewEntry {
  id: string;
  address: string;
  flags: Set<string>;
  /** The id of the primary it replicates, for a replica. */
  masterId: string | undefined;
  connected: boolean;
  slots: SlotRange[];
}

export type ClusterView = ClusterViewEntry[];

/** `CLUSTER NODES`: `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slot>…` */
export function parseClusterNodes(text: string): ClusterView {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [id = "", addr = "", flags = "", master = "", , , , link = "", ...slots] =
        line.split(" ");
      return {
        id,
        address: addr.split("@")[0] ?? addr,
        flags: new Set(flags.split(",")),
        masterId: master === "-" ? undefined : master,
        connected: link === "connected",
        // Migrating and importing slots ("[123->-id]") are not owned yet.
        slots: slots
          .filter((s) => !s.startsWith("["))
          .map((s): SlotRange => {
            const [a, b = a] = s.split("-").map(Number);
            return [a ?? 0, b ?? 0];
          }),
      };
    });
}

/**
 * Throws, saying why, unless every running node says cluster_state:ok with every slot served, and
 * sees the same primaries and replicas, with every running node connected and not failing, and
 * every running replica's link to its primary up (a replica that never synced would refuse to be
 * promoted).
 */
export async function assertHealthy(
  running: (RedisNode & { id: string })[],
  known: number,
): Promise<true> {
  const signatures = await Promise.all(
    running.map((node) =>
      withRedis(node.url, async (r) => {
        const state = parseInfo(String(await r.call("CLUSTER", "INFO")));
        const where = node.address;
        if (state.get("cluster_state") !== "ok") throw new Error(`${where}: cluster_state not ok`);
        if (state.get("cluster_slots_ok") !== "16384") {
          throw new Error(`${where}: ${state.get("cluster_slots_ok")} slots ok`);
        }
        if (state.get("cluster_known_nodes") !== String(known)) {
          throw new Error(`${where} knows ${state.get("cluster_known_nodes")} nodes`);
        }
        const view = parseClusterNodes(String(await r.call("CLUSTER", "NODES")));
        for (const other of running) {
          const e = view.find((v) => v.id === other.id);
          const bad = !e?.connected || e.flags.has("fail") || e.flags.has("fail?");
          if (bad) throw new Error(`${where} sees ${other.address} failing or unknown`);
        }
        const replication = await info(r, "replication");
        if (replication.get("role") === "slave" && replication.get("master_link_status") !== "up") {
          throw new Error(`${where}: link to its primary down`);
        }
        return view
          .filter((e) => running.some((n) => n.id === e.id))
          .map((e) => `${e.id}:${e.masterId ?? "-"}:${e.slots.join(";")}`)
          .sort()
          .join(" ");
      }),
    ),
  );
  if (new Set(signatures).size !== 1) throw new Error("the nodes disagree on the cluster");
  return true;
}

/**
 * The id of the primary that now serves all of `slots` (the killed primary's), as `redis` sees
 * it, once that is another node and the cluster is ok; throws otherwise.
 */
export async function promotedOwner(
  redis: Redis,
  oldId: string,
  slots: SlotRange[],
): Promise<string> {
  const state = parseInfo(String(await redis.call("CLUSTER", "INFO")));
  if (state.get("cluster_state") !== "ok") throw new Error("cluster_state not ok");
  const view = parseClusterNodes(String(await redis.call("CLUSTER", "NODES")));
  const owners = new Set(
    slots.map(([a]) => view.find((e) => e.slots.some(([x, y]) => x <= a && a <= y))?.id),
  );
  const [owner] = owners;
  if (owners.size !== 1 || owner === undefined) throw new Error("slots split or unserved");
  if (owner === oldId) throw new Error("still served by the old primary");
  return owner;
}
