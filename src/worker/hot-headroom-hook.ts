import type { Logger } from "pino";
import type { DeriveWindows } from "../alerts/row-windows.js";
import { hotUpdates } from "../headroom/hot-series.js";
import type { HotStore } from "../headroom/hot-store.js";
import type { Manifest } from "./manifest-store.js";

// After ClickHouse acknowledged a batch (never before: /api/v1/headroom must not show what is
// not stored), its rows' latest figures go to the hot headroom in Redis in one script call.
// A redelivered batch merges to the same state, so the hook may run again on retry. Redis
// unreachable fails the hook (and it is retried, like the alerts' hook); Redis refusing the
// script would refuse it every time, so instead the batch's projects are marked not whole, and
// their next read refills them from ClickHouse: ingest never stops for the hot copy.

export function createHotHeadroomHook(deps: {
  store: HotStore;
  logger: Logger;
  /** How a row's windows are derived: windowsOfRecord unless a test gives its own. */
  deriveWindows?: DeriveWindows;
}) {
  return async function onStored(manifest: Manifest): Promise<void> {
    const updates = hotUpdates(manifest.rows, deps.deriveWindows);
    try {
      // The manifest's token: a batch delivered again adds its counts once (counted-windows.ts).
      const refused = await deps.store.write(updates, manifest.token);
      if (refused > 0) {
        deps.logger.warn({ refused }, "hot headroom: series over the per-project cap not kept");
      }
    } catch (err) {
      // A reply (script error), not a connection failure: the same batch would fail again.
      if (!(err instanceof Error && err.name === "ReplyError")) throw err;
      deps.logger.error(
        { err: err.message, projects: updates.size },
        "hot headroom: Redis refused the batch; its projects will be refilled from ClickHouse",
      );
      await deps.store.invalidate(updates.keys());
    }
  };
}
