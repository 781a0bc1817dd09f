// The parts of the schema's DDL that differ on a ClickHouse cluster (CLICKHOUSE_CLUSTER). Without a
// cluster every function here returns the single-node text, so migrations.ts reads as one schema
// with a few named holes, and the single-node statements are the ones they always were.
//
// On a cluster every statement runs ON CLUSTER (ClickHouse runs it on each host of the cluster).
// A table that stores rows is `<name>_local` on each host, a Replicated*MergeTree; under its
// public name stands a Distributed table over the `_local` tables of every shard, so analysts,
// the views and Headroom's own queries use the same names as on a single node. Materialized views
// stay per host: they read the host's `reports_local` and write its `*_local` rollup, so a block is
// aggregated on the shard it lands on, and the rollup's part replicates like any other insert.
//
// Keeper paths are explicit, `/clickhouse/tables/{shard}/{database}/<table>_local`, rather than the
// `{uuid}` form that ClickHouse's Atomic-database docs recommend. `{uuid}` exists so that a table
// dropped and created again, or renamed, gets a path of its own; these migrations never drop or
// rename a table. In exchange an explicit path is the same text on every host: a replica added
// later gets its tables from the very same statements, where `{uuid}` needs each table's UUID
// copied from another host (ClickHouse takes `{uuid}` only ON CLUSTER, with an explicit UUID,
// or in a Replicated database).
// `{shard}` in the path is what keeps shards apart: each shard has its own replicas and its own
// deduplication log, which the sinks rely on (see report-sink.ts).

export interface DdlContext {
  db: string;
  /** The cluster's name in the servers' `remote_servers`; unset: a single node. */
  cluster?: string | undefined;
}

export type MergeTreeFamily = "ReplacingMergeTree" | "AggregatingMergeTree";

/** How long a replicated table keeps a block's hash; ClickHouse 26's default is one hour. */
export const REPLICATED_DEDUP_SECONDS = 7 * 24 * 3600;

const LOCAL = "_local";

/** ` ON CLUSTER 'name'`, to follow the name of the object a statement creates or alters. */
export function onCluster(ctx: DdlContext): string {
  return ctx.cluster ? ` ON CLUSTER '${ctx.cluster}'` : "";
}

/** `db.name` of the table that holds a table's rows on this host: `name_local` on a cluster. */
export function stored(ctx: DdlContext, name: string): string {
  return ctx.cluster ? `${ctx.db}.${name}${LOCAL}` : `${ctx.db}.${name}`;
}

/** The engine of a table that stores rows: replicated within its shard on a cluster. */
export function engine(ctx: DdlContext, family: MergeTreeFamily, name: string): string {
  if (!ctx.cluster) return family;
  return `Replicated${family}('/clickhouse/tables/{shard}/{database}/${name}${LOCAL}', '{replica}')`;
}

/**
 * The insert deduplication window, in inserts. A replicated table also forgets a block's hash
 * after a time (replicated_deduplication_window_seconds, counted from its latest insert): set as
 * long as a worker can plausibly hold a batch, so the count decides, as on a single node.
 */
export function dedupWindow(ctx: DdlContext, inserts: number): string {
  if (!ctx.cluster) return `non_replicated_deduplication_window = ${inserts}`;
  return `replicated_deduplication_window = ${inserts}, replicated_deduplication_window_seconds = ${REPLICATED_DEDUP_SECONDS}`;
}

/**
 * On a cluster, the Distributed table under a storage table's public name. `shardingKey` is for
 * tables Headroom inserts into: rows are spread by it, so the same row always goes to the same
 * shard. Without one (rollups, written by materialized views on each shard) the table only
 * reads, and an insert into it is refused on a cluster of more than one shard.
 */
export function distributedFront(ctx: DdlContext, name: string, shardingKey?: string): string[] {
  if (!ctx.cluster) return [];
  const args = [`'${ctx.cluster}'`, `'${ctx.db}'`, `'${name}${LOCAL}'`];
  if (shardingKey) args.push(shardingKey);
  return [
    `CREATE TABLE IF NOT EXISTS ${ctx.db}.${name}${onCluster(ctx)} AS ${stored(ctx, name)}
    ENGINE = Distributed(${args.join(", ")})`,
  ];
}

export function createDatabase(ctx: DdlContext): string {
  return `CREATE DATABASE IF NOT EXISTS ${ctx.db}${onCluster(ctx)}`;
}

/**
 * The migrations' own bookkeeping. On a cluster it is one table replicated to every host (no
 * `{shard}` in its path, so the replica name carries it): any host reads the whole list locally,
 * whichever host `headroom migrate` reached before.
 */
export function migrationsTable(ctx: DdlContext): string {
  const tableEngine = ctx.cluster
    ? "ReplicatedReplacingMergeTree('/clickhouse/tables/{database}/schema_migrations', '{shard}-{replica}')"
    : "ReplacingMergeTree";
  return `CREATE TABLE IF NOT EXISTS ${ctx.db}.schema_migrations${onCluster(ctx)} (
      version UInt32, name String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3)
    ) ENGINE = ${tableEngine} ORDER BY version`;
}
