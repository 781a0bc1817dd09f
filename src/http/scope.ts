import type { Scope } from "../keys/key-format.js";
import type { KeyLookup } from "../keys/key-store.js";
import { HttpError } from "./errors.js";

// A key works only within its scope (RFC 6750's 403): report keys report, read keys read, and
// management keys (manage, admin) only manage — the data plane refuses them, and the control
// plane refuses data keys.

export function requireScope(lookup: KeyLookup, scope: Scope | readonly Scope[]): void {
  const allowed: readonly Scope[] = typeof scope === "string" ? [scope] : scope;
  if (allowed.includes(lookup.scope)) return;
  const named = allowed.length === 1 ? `a ${allowed[0]}` : `an ${allowed.join(" or ")}`;
  throw new HttpError("insufficient_scope", `this endpoint needs ${named} key`, {
    headers: { "www-authenticate": 'Bearer error="insufficient_scope"' },
  });
}
