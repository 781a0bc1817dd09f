import { createHmac } from "node:crypto";

// The account a provider names in its own answer (docs/providers.md, "Accounts"): the reports
// that name the same one draw on the same provider limit (docs/pools.md). The names are read from
// the `headers` a report forwards, before every header outside the rate-limit allowlist is
// dropped, and are kept only as a keyed hash: HMAC-SHA256 under the deployment's POOL_SECRET over
// the project, the provider and the names. The hash is scoped to the project (two tenants under
// one organisation get two hashes and never learn they share one) and cannot be reversed or
// recomputed without the secret (an organisation id has too few unknown characters for a plain
// hash to hide it). The clear values never leave this module: not stored, logged or answered.

/** Response headers that name the account a provider counts a call against, per docs/providers.md. */
export const ACCOUNT_HEADERS = [
  "openai-organization", // OpenAI (and Azure OpenAI's OpenAI-compatible answers do not send it)
  "openai-project", // OpenAI, for a project-scoped key
  "anthropic-organization-id", // Anthropic
] as const;

const ACCOUNT = new Set<string>(ACCOUNT_HEADERS);
/** A longer value is no provider's id: ignored rather than hashed. */
export const MAX_ACCOUNT_VALUE_LENGTH = 256;
/** The stored hash: 32 hex digits (128 bits of the HMAC). */
export const ACCOUNT_HASH_LENGTH = 32;

/**
 * The account headers of what a report forwards as `headers` (an object, or [name, value]
 * pairs; names case-insensitive), as sorted `name=value` lines, or null when it names none.
 */
export function accountHeaderValues(sent: unknown): string[] | null {
  if (sent === null || typeof sent !== "object") return null;
  const entries = Array.isArray(sent) ? sent : Object.entries(sent);
  const found = new Map<string, string>();
  for (const pair of entries) {
    if (!Array.isArray(pair) || pair.length !== 2) continue;
    const [name, value] = pair as [unknown, unknown];
    if (typeof name !== "string" || typeof value !== "string") continue;
    const lower = name.toLowerCase();
    if (!ACCOUNT.has(lower)) continue;
    const v = value.trim();
    if (v.length === 0 || v.length > MAX_ACCOUNT_VALUE_LENGTH || !v.isWellFormed()) continue;
    // A name sent twice: the first wins (a provider sends each once).
    if (!found.has(lower)) found.set(lower, v);
  }
  if (found.size === 0) return null;
  return [...found].map(([n, v]) => `${n}=${v}`).sort();
}

/** The account's keyed hash, scoped to the project and provider. */
export function accountHash(
  secret: string,
  projectId: string,
  provider: string,
  values: readonly string[],
): string {
  return createHmac("sha256", secret)
    .update(JSON.stringify(["headroom-pool-account/1", projectId, provider, ...values]))
    .digest("hex")
    .slice(0, ACCOUNT_HASH_LENGTH);
}

/** What a report forwards → its account's hash, or null (no secret, or no account named). */
export function accountOf(
  secret: string | undefined,
  projectId: string,
  provider: string,
  sentHeaders: unknown,
): string | null {
  if (!secret) return null;
  const values = accountHeaderValues(sentHeaders);
  return values === null ? null : accountHash(secret, projectId, provider, values);
}
