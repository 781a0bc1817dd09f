import type { HeldJob, Manifest, ManifestStore } from "../../src/worker/manifest-store.js";

// The ManifestStore contract in memory, for unit tests of the processor: the same all-or-nothing
// claim as the Redis script, with `locks` standing in for BullMQ's job locks.

export function memoryManifests() {
  const manifests = new Map<string, Manifest & { left: number }>();
  const owners = new Map<string, string>();
  /** job id → the lock token that holds it now. */
  const locks = new Map<string, string>();
  /** Calls of `replicated` that fail (the replicas lag), and every call's outcome. */
  const replication = { failures: 0, calls: [] as ("ok" | "lagging")[] };

  const store: ManifestStore = {
    async claim(manifest, held: HeldJob[]) {
      const lost = held.filter((j) => locks.get(j.id) !== j.lockToken).map((j) => j.id);
      const owned = new Map<string, string>();
      for (const j of held) {
        const t = owners.get(j.id);
        if (t && !lost.includes(j.id)) owned.set(j.id, t);
      }
      if (lost.length > 0 || owned.size > 0) return { claimed: false, lost, owned };
      manifests.set(manifest.token, { ...structuredClone(manifest), left: held.length });
      for (const j of held) owners.set(j.id, manifest.token);
      return { claimed: true };
    },
    async owners(ids) {
      return new Map(ids.flatMap((id) => (owners.has(id) ? [[id, owners.get(id) as string]] : [])));
    },
    async get(token) {
      const m = manifests.get(token);
      return m ? { token: m.token, rows: m.rows, jobs: m.jobs } : null;
    },
    async lost(held) {
      return held.filter((j) => locks.get(j.id) !== j.lockToken).map((j) => j.id);
    },
    async replicated(token, ids) {
      if (replication.failures > 0) {
        replication.failures -= 1;
        replication.calls.push("lagging");
        throw new Error("0 of 1 replicas hold the manifest");
      }
      replication.calls.push("ok");
      return ids.filter((id) => owners.get(id) !== token);
    },
    async release(ids) {
      for (const id of ids) {
        const t = owners.get(id);
        if (!t) continue;
        owners.delete(id);
        const m = manifests.get(t);
        if (m && --m.left <= 0) manifests.delete(t);
      }
    },
  };
  return { store, manifests, owners, locks, replication };
}
