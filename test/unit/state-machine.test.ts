import { describe, expect, it } from "vitest";
import {
  INITIAL,
  type MachineState,
  step,
  type Thresholds,
  type Transition,
} from "../../src/alerts/state-machine.js";

// The threshold / hysteresis / cooldown state machine of one series, sample by sample.

const TH: Thresholds = { warnPct: 70, criticalPct: 90, hysteresisPct: 5, cooldownMs: 600_000 };

function run(pcts: number[], th = TH, gapMs = 1_000, from: MachineState = INITIAL) {
  let state = from;
  const fired: (Transition | null)[] = [];
  pcts.forEach((pct, i) => {
    const r = step(state, pct, i * gapMs, th);
    state = r.state;
    fired.push(r.fire);
  });
  return { state, fired: fired.filter((f) => f !== null), all: fired };
}

describe("alert state machine", () => {
  it("50, 75, 95, 95, 60, 40 at 70/90: one warning, one critical, one resolved", () => {
    const { fired, state } = run([50, 75, 95, 95, 60, 40]);
    expect(fired).toEqual(["warning", "critical", "resolved"]);
    expect(state.seq).toBe(3);
    expect(state.level).toBe("ok");
  });

  it("a value flapping around the critical threshold sends one alert, not hundreds", () => {
    const flaps = Array.from({ length: 400 }, (_, i) => (i % 2 === 0 ? 91 : 88));
    expect(run(flaps).fired).toEqual(["critical"]);
  });

  it("flapping around the warning threshold: one warning, no resolve until clearly below", () => {
    const flaps = Array.from({ length: 400 }, (_, i) => (i % 2 === 0 ? 71 : 66));
    const { fired, state } = run(flaps);
    expect(fired).toEqual(["warning"]);
    expect(state.level).toBe("warning");
  });

  it("flapping across the resolve point is held back by the cooldown", () => {
    // 71 warns, 64 resolves, then every new warning falls within the cooldown.
    const flaps = Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? 71 : 64));
    expect(run(flaps).fired).toEqual(["warning", "resolved"]);
  });

  it("re-alerts after the cooldown when usage is still high", () => {
    const th = { ...TH, cooldownMs: 10_000 };
    // warn at 0 s, resolve at 1 s, high again within the cooldown (held), still high after it.
    const { all } = run([75, 50, 75, 75, 75, 75, 75, 75, 75, 75, 75, 75, 75], th);
    expect(all.filter(Boolean)).toEqual(["warning", "resolved", "warning"]);
    expect(all.indexOf("warning", 1)).toBe(10);
  });

  it("an escalation to critical is not held back by a recent warning", () => {
    expect(run([75, 95]).fired).toEqual(["warning", "critical"]);
  });

  it("nor by a critical sent before the series resolved: receivers told warning hear of it", () => {
    // 95, 40, 75, 95 a minute apart, within a 10 min cooldown.
    const { fired, state } = run([95, 40, 75, 95, 95], TH, 60_000);
    expect(fired).toEqual(["critical", "resolved", "warning", "critical"]);
    expect([state.level, state.notified]).toEqual(["critical", "critical"]);
    // Straight back from ok to critical is a repeat: the cooldown holds it.
    expect(run([95, 40, 95], TH, 60_000).fired).toEqual(["critical", "resolved"]);
  });

  it("straight to critical skips the warning", () => {
    expect(run([10, 99, 10]).fired).toEqual(["critical", "resolved"]);
  });

  it("critical falling to warning sends nothing; it resolves once", () => {
    expect(run([95, 80, 95, 80, 30]).fired).toEqual(["critical", "resolved"]);
  });

  it("hysteresis 0 resolves as soon as usage is below the threshold", () => {
    expect(run([75, 69.9], { ...TH, hysteresisPct: 0 }).fired).toEqual(["warning", "resolved"]);
  });

  it("resolves only what was sent: a warning held by the cooldown is not resolved", () => {
    const th = { ...TH, cooldownMs: 60_000 };
    const first = run([75, 10], th);
    // Within the cooldown: the warning is held, and so is its resolve.
    const again = run([75, 10], th, 1_000, first.state);
    expect(first.fired).toEqual(["warning", "resolved"]);
    expect(again.fired).toEqual([]);
  });

  it("exactly at a threshold counts as reaching it", () => {
    expect(run([70]).fired).toEqual(["warning"]);
    expect(run([90]).fired).toEqual(["critical"]);
  });
});
