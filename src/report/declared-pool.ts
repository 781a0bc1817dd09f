import type { DeclaredPool } from "../providers/declared-limit.js";
import { REPORT_COLUMNS, type ReportColumn, type ReportRow } from "./report-schema.js";

// Step 3 of a report's placement in a pool (docs/pools.md): a report whose provider named no
// account and whose client sent no `pool` draws on the pool its project declared for its app and
// provider, exactly as if the client had sent that pool's label. Applied to a row before it is
// stored, so ClickHouse, the hot headroom, the alerts and the exporter all see one pool key.

const at = (column: string) => REPORT_COLUMNS.indexOf(column as ReportColumn);
const PROJECT_AT = at("project_id");
const APP_AT = at("app");
const PROVIDER_AT = at("provider");
const ACCOUNT_AT = at("account");
const POOL_AT = at("pool");

const empty = (v: unknown) => v === null || v === undefined || v === "";

/** The project of a row that names neither an account nor a pool label; null for any other. */
export function unplacedProject(row: ReportRow): string | null {
  if (POOL_AT < 0 || !empty(row[ACCOUNT_AT]) || !empty(row[POOL_AT])) return null;
  const project = row[PROJECT_AT];
  return typeof project === "string" ? project : null;
}

/** A project's declared pools as provider and app → the pool's label. */
export function declaredPoolIndex(pools: readonly DeclaredPool[]): Map<string, string> {
  const index = new Map<string, string>();
  for (const pool of pools) {
    // An app is in one pool of a provider (the control plane refuses two); the first wins.
    for (const app of pool.apps) {
      const key = `${pool.provider}\n${app}`;
      if (!index.has(key)) index.set(key, pool.label);
    }
  }
  return index;
}

/** The row with its declared pool's label, or the row itself when its app is in none. */
export function withDeclaredPool(row: ReportRow, index: ReadonlyMap<string, string>): ReportRow {
  const label = index.get(`${row[PROVIDER_AT]}\n${row[APP_AT]}`);
  if (label === undefined) return row;
  const placed = row.slice();
  placed[POOL_AT] = label;
  return placed;
}
