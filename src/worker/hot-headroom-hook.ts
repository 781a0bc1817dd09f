import type { Logger } from "pino";
import { hotUpdates } from "../api/hot-series.js";
import type { HotStore } from "../api/hot-store.js";
import type { Manifest } from "./batch-manifests.js";

// After ClickHouse acknowledged a batch (never before: /api/v1/headroom must not show what is
// not stored), its rows' latest figures go to the hot headroom in Redis in one script call.
// A redelivered batch merges to the same state, so the hook may run again on retry.

export function createHotHeadroomHook(deps: { store: HotStore; logger: Logger }) {
  return async function onStored(manifest: Manifest): Promise<void> {
    const refused = await deps.store.write(hotUpdates(manifest.rows));
    if (refused > 0) {
      deps.logger.warn({ refused }, "hot headroom: series over the per-project cap not kept");
    }
  };
}
