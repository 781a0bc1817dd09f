import type { KeyLookup } from "./key-store.js";

// In-process cache in front of the key store, for hits and misses alike. Entries live at most
// `ttlMs`, which bounds how long a revoked key keeps working on a running edge. Concurrent misses
// for one key share a single lookup.

interface Entry {
  value: KeyLookup | null;
  expires: number;
}

export function createKeyCache(
  lookup: (key: string) => Promise<KeyLookup | null>,
  opts: { ttlMs: number; maxEntries?: number; now?: () => number },
) {
  const now = opts.now ?? Date.now;
  const maxEntries = opts.maxEntries ?? 100_000;
  const entries = new Map<string, Entry>();
  const pending = new Map<string, Promise<KeyLookup | null>>();

  return async function cachedLookup(key: string): Promise<KeyLookup | null> {
    const hit = entries.get(key);
    if (hit && hit.expires > now()) return hit.value;
    const inFlight = pending.get(key);
    if (inFlight) return inFlight;
    const p = lookup(key)
      .then((value) => {
        if (opts.ttlMs > 0) {
          // Map keeps insertion order, so the first key is the oldest.
          if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
          entries.set(key, { value, expires: now() + opts.ttlMs });
        }
        return value;
      })
      .finally(() => pending.delete(key));
    pending.set(key, p);
    return p;
  };
}
