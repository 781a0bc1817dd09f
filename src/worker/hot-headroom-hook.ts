import type { Logger } from "pino";
import type { DeriveWindows } from "../alerts/row-windows.js";
import { type HotSeries, hotUpdates } from "../headroom/hot-series.js";
import type { HotStore, HotWritePlan } from "../headroom/hot-store.js";
import type { Manifest } from "./manifest-store.js";

// After ClickHouse acknowledged a batch (never before: /api/v1/headroom must not show what is
// not stored), its rows' latest figures go to the hot headroom in Redis (hot-store.ts).
// A redelivered batch merges to the same state, so the hook may run again on retry. Redis
// unreachable fails the hook (and it is retried, like the alerts' hook), and so do copies that
// other writes kept changing under the merge (hot-store.ts): a refill does not bring back a
// batch's counts, so the batch is written again, later, and its token adds only the counts still
// owed. Redis refusing the script would refuse it every time, so instead the batch's projects
// are marked not whole, and their next read refills them from ClickHouse: ingest never stops for
// the hot copy.
//
// While ClickHouse takes a batch, its write is read and merged ahead (`prepare`: nothing is
// written), so that once it is stored only the commit is left: a report shows that much sooner.
// A batch stored without some of its rows (refused, dead-lettered) is merged again from the rows
// stored.

/** Batches read ahead at once: those being inserted (2 slots), and a few whose insert is retried. */
const PREPARED_MAX = 8;

interface Prepared {
  rows: unknown[];
  updates: Map<string, Map<string, HotSeries>>;
  plan: Promise<HotWritePlan>;
}

export function createHotHeadroomHook(deps: {
  store: HotStore;
  logger: Logger;
  /** How a row's windows are derived: windowsOfRecord unless a test gives its own. */
  deriveWindows?: DeriveWindows;
}) {
  // By token, oldest first; one whose insert never ended is dropped past the bound.
  const prepared = new Map<string, { ahead: Promise<Prepared | null>; drop: () => void }>();
  const forget = (token: string) => {
    prepared.get(token)?.drop();
    prepared.delete(token);
  };

  /** As the batch's insert gets its slot: the rows to be stored. */
  function prepare(manifest: Manifest): void {
    forget(manifest.token);
    let dropped = false;
    // A turn later, so that the insert is sent before this CPU is spent; nothing is read for a
    // batch dropped meanwhile (past the bound, or read ahead again).
    const ahead = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      if (dropped) return null;
      const updates = hotUpdates(manifest.rows, deps.deriveWindows);
      const plan = deps.store.prepare(updates, manifest.token);
      plan.catch(() => {}); // The write reads again.
      return { rows: manifest.rows, updates, plan };
    });
    // A read ahead that failed is no failure: the write does it all again. Nor is one whose
    // write never comes (the insert lost its jobs to another worker), which nothing awaits.
    ahead.catch(() => {});
    prepared.set(manifest.token, {
      ahead,
      drop: () => {
        dropped = true;
      },
    });
    for (const token of prepared.keys()) {
      if (prepared.size <= PREPARED_MAX) break;
      forget(token);
    }
  }

  async function onStored(manifest: Manifest): Promise<void> {
    const ahead = prepared.get(manifest.token)?.ahead;
    prepared.delete(manifest.token);
    const ready = await ahead?.catch(() => undefined);
    // A plan is of the rows read ahead: a batch stored without some of them is merged again.
    const same = ready != null && ready.rows === manifest.rows;
    const updates = same ? ready.updates : hotUpdates(manifest.rows, deps.deriveWindows);
    try {
      // The manifest's token: a batch delivered again adds its counts once (counted-windows.ts).
      const refused = await deps.store.write(
        updates,
        manifest.token,
        same ? ready.plan : undefined,
      );
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
  }

  return { prepare, onStored };
}
