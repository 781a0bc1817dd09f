import type { Scope } from "../keys/key-format.js";
import type { KeyLookup } from "../keys/key-store.js";
import { HttpError } from "./errors.js";

// A key works only within its scope: report keys report, read keys read (RFC 6750's 403).

export function requireScope(lookup: KeyLookup, scope: Scope): void {
  if (lookup.scope === scope) return;
  throw new HttpError("insufficient_scope", `this endpoint needs a ${scope} key`, {
    headers: { "www-authenticate": 'Bearer error="insufficient_scope"' },
  });
}
