import { createHash } from "node:crypto";
import { REPORT_COLUMNS, type ReportColumn, type ReportRow } from "./report-schema.js";

// Which pool a stored report draws on (docs/pools.md), read from its row: what the hot headroom
// and the alerts worker both key a pool by, so that /headroom, the exporter and an alert name the
// same pool with the same id.

const ACCOUNT_AT = REPORT_COLUMNS.indexOf("account" as ReportColumn);
const POOL_AT = REPORT_COLUMNS.indexOf("pool" as ReportColumn);

/**
 * A report's pool key, in the order docs/pools.md gives: the account its provider named (`a:`
 * and its keyed hash), else the client's label (`l:` and the label), else '' (the app alone).
 * A row of an older shape (shorter) has neither.
 */
export function poolKeyOf(row: ReportRow): string {
  const account = ACCOUNT_AT >= 0 ? row[ACCOUNT_AT] : null;
  if (account !== null && account !== undefined && account !== "") return `a:${account}`;
  const label = POOL_AT >= 0 ? row[POOL_AT] : null;
  if (label !== null && label !== undefined && label !== "") return `l:${label}`;
  return "";
}

/** The client's label of a pool key, or null (an account's pool, or none). */
export const poolLabelOf = (key: string): string | null =>
  key.startsWith("l:") ? key.slice(2) : null;

/** A pool's id: 12 hex digits of SHA-256 over what identifies it (the account is a hash already). */
export function poolId(provider: string, model: string, key: string): string {
  const named = JSON.stringify([provider, model, key]);
  let id = poolIds.get(named);
  if (id === undefined) {
    if (poolIds.size >= POOL_IDS_MAX) poolIds.clear();
    id = createHash("sha256").update(named).digest("hex").slice(0, 12);
    poolIds.set(named, id);
  }
  return id;
}

/** Ids made lately: every /headroom answer names each of its pools again. */
const poolIds = new Map<string, string>();
const POOL_IDS_MAX = 4_096;
