import { describe, expect, it } from "vitest";
import { windowKey } from "../../src/alerts/row-windows.js";
import { limitsKey, usageLimits } from "../../src/api/queries/usage-limits.js";
import type { HotSeries } from "../../src/headroom/hot-series.js";
import type { ProjectDeclarations } from "../../src/providers/declared-limit.js";

// What a held /usage answer's figures were made with (limitsKey): a refresh whose key moved reads
// the whole range again, so the key moves with the limits' values and nothing else.

const NONE: ProjectDeclarations = { limits: [], pools: [] };
const DAY = windowKey({ dimension: "requests", window: "1d" });

/** A Gemini series whose 429 at `t` (report `id`) taught `limit` requests a day. */
const taught = (t: number, id: string, limit: number, pool = ""): HotSeries => ({
  ls: t,
  p: {},
  lw: { [DAY]: [t, id, String(limit)] },
  ...(pool ? { g: [t, id, pool, "k1"] } : {}),
});

const hot = (...series: [string, HotSeries][]) =>
  new Map(series.map(([app, s]) => [JSON.stringify(["gemini", "gemini-2.5-flash", app]), s]));

describe("limitsKey", () => {
  it("stays the same when a 429 teaches the same limit again (a refresh stays incremental)", () => {
    const first = usageLimits(NONE, hot(["gem", taught(1_000, "r1", 250)]));
    const again = usageLimits(NONE, hot(["gem", taught(61_000, "r2", 250)]));
    expect(first).not.toBeNull();
    expect(limitsKey(again)).toBe(limitsKey(first));
  });

  it("moves when a learned limit, a declared one or a series' pool changes", () => {
    const base = limitsKey(usageLimits(NONE, hot(["gem", taught(1_000, "r1", 250)])));
    expect(limitsKey(usageLimits(NONE, hot(["gem", taught(1_000, "r1", 500)])))).not.toBe(base);
    expect(limitsKey(usageLimits(NONE, hot(["gem", taught(1_000, "r1", 250, "l:team")])))).not.toBe(
      base,
    );
    const declared: ProjectDeclarations = {
      limits: [
        {
          provider: "gemini",
          model: "gemini-2.5-flash",
          dimension: "requests",
          window: "1m",
          limit: 10,
        },
      ],
      pools: [],
    };
    expect(limitsKey(usageLimits(declared, hot(["gem", taught(1_000, "r1", 250)])))).not.toBe(base);
  });

  it("moves when a pool's newest member taught another limit, though no member's value moved", () => {
    // Two members of one pool: the pool counts against the limit its newest 429 taught.
    const older = limitsKey(
      usageLimits(
        NONE,
        hot(["a", taught(1_000, "r1", 250, "l:team")], ["b", taught(2_000, "r2", 500, "l:team")]),
      ),
    );
    const newer = limitsKey(
      usageLimits(
        NONE,
        hot(["a", taught(3_000, "r3", 250, "l:team")], ["b", taught(2_000, "r2", 500, "l:team")]),
      ),
    );
    expect(newer).not.toBe(older);
  });
});
