import type { KeyLookup } from "./key-store.js";

// In-process cache in front of the key store, for hits and misses alike. Entries live at most
// `ttlMs`, which bounds how long a revoked key keeps working on a running edge, and never past a
// rotated-out secret's `expiresAt`. Concurrent misses
// for one key share a single lookup. `peek` tells what the cache knows without looking up.

/** A key lookup; with `peek`, one that can tell when it would answer without a Redis call. */
export interface LookupKey {
  (key: string): Promise<KeyLookup | null>;
  /** The fresh cached answer (null: a known-bad key), or undefined when a lookup is needed. */
  peek?(key: string): KeyLookup | null | undefined;
  /** Whether the cache's last answer for `key`, fresh or expired, was a good key. */
  servedBefore?(key: string): boolean;
}

interface Entry {
  value: KeyLookup | null;
  expires: number;
}

export function createKeyCache(
  lookup: (key: string) => Promise<KeyLookup | null>,
  opts: { ttlMs: number; maxEntries?: number; now?: () => number },
): LookupKey {
  const now = opts.now ?? Date.now;
  const maxEntries = opts.maxEntries ?? 100_000;
  const entries = new Map<string, Entry>();
  const pending = new Map<string, Promise<KeyLookup | null>>();

  const peek = (key: string): KeyLookup | null | undefined => {
    const hit = entries.get(key);
    return hit && hit.expires > now() ? hit.value : undefined;
  };

  async function cachedLookup(key: string): Promise<KeyLookup | null> {
    const hit = peek(key);
    if (hit !== undefined) return hit;
    const inFlight = pending.get(key);
    if (inFlight) return inFlight;
    const p = lookup(key)
      .then((value) => {
        if (opts.ttlMs > 0) {
          // Map keeps insertion order, so the first key is the oldest.
          if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
          // A rotated-out secret is not held past its end: it fails there on every edge.
          const expires = Math.min(
            now() + opts.ttlMs,
            value?.expiresAt ?? Number.POSITIVE_INFINITY,
          );
          entries.set(key, { value, expires });
        }
        return value;
      })
      .finally(() => pending.delete(key));
    pending.set(key, p);
    return p;
  }

  const servedBefore = (key: string) => Boolean(entries.get(key)?.value);

  return Object.assign(cachedLookup, { peek, servedBefore });
}
