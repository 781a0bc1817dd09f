import type { Config } from "../config.js";
import type { DdlContext } from "./cluster-ddl.js";

// What every migration's statements are written for: the database, the cluster (if any) and
// the retention its TTLs follow (migrate.ts applies them, retention.ts keeps the TTLs).

export interface MigrationContext extends DdlContext {
  retentionDays: number;
}

/** The schema's settings as the configuration gives them, for every process that migrates. */
export function migrationContext(
  config: Pick<Config, "CLICKHOUSE_DATABASE" | "RETENTION_DAYS" | "CLICKHOUSE_CLUSTER">,
): MigrationContext {
  return {
    db: config.CLICKHOUSE_DATABASE,
    retentionDays: config.RETENTION_DAYS,
    cluster: config.CLICKHOUSE_CLUSTER,
  };
}
