import { describe, expect, it } from "vitest";
import { type LatestFigures, seriesView } from "../../src/api/headroom-view.js";
import { windowNow } from "../../src/api/now-model.js";

// The model of "now" (now-model.ts) through a series' view: figures count down from the answer's
// `at`, one clock for the reset and the exhaustion, a reset window is no longer critical, and
// what cannot be known is null with a reason.

const T = Date.UTC(2030, 5, 15, 18, 58, 45);
const opts = (now: number) => ({ now, staleAfterMs: 900_000 });

/** gpt-4o's requests: 500 a minute, resetting 60 s after the report, burning 10/s. */
function gpt4o(remaining: number, resetMs: number | null = 60_000): LatestFigures {
  return {
    provider: "openai",
    model: "gpt-4o",
    app: "chat",
    lastSeen: T,
    limitsAt: T,
    creditsAt: null,
    requests: { limit: 500, remaining, resetMs },
    tokens: { limit: null, remaining: null, resetMs: null },
    credits: { limit: null, remaining: null },
  };
}
const burning = (remaining: number, perS = 10) => ({
  requests: [
    [T - 10_000, remaining + 10 * perS],
    [T, remaining],
  ] as [number, number][],
  tokens: [],
  credits: [],
});

describe("the model of now", () => {
  it("counts the time to exhaustion down from the answer's at, not from the report", () => {
    const first = seriesView(gpt4o(200), burning(200), [], opts(T + 2_000)).requests;
    const later = seriesView(gpt4o(200), burning(200), [], opts(T + 12_000)).requests;
    expect(first.exhausted_at).toBe(new Date(T + 20_000).toISOString());
    expect(later.exhausted_at).toBe(first.exhausted_at);
    expect(first.exhaustion_eta_s).toBe(18);
    expect(later.exhaustion_eta_s).toBe(8);
    // Past the projected exhaustion: exhausted (0), not "in 1 s" for ever.
    expect(seriesView(gpt4o(200), burning(200), [], opts(T + 25_000)).requests).toMatchObject({
      exhaustion_eta_s: 0,
      exhaustion_unknown: null,
    });
  });

  it("uses one clock for the reset and the exhaustion: a series that ran out is not 'reset first'", () => {
    // Out at T + 20 s, reset at T + 60 s; read at T + 50 s, 10 s before the reset.
    const v = seriesView(gpt4o(200), burning(200), [], opts(T + 50_000)).requests;
    expect(v.resets_in_s).toBe(10);
    expect(v.exhaustion_eta_s).toBe(0);
    expect(v.exhaustion_unknown).toBeNull();
    // A window that resets before it would run out says so, with the reason.
    const slow = seriesView(gpt4o(450), burning(450, 1), [], opts(T + 1_000)).requests;
    expect(slow).toMatchObject({ exhaustion_eta_s: null, exhaustion_unknown: "resets_first" });
  });

  it("no longer counts a window that has reset since its last report as warning or critical", () => {
    const before = seriesView(gpt4o(20), burning(20), [], opts(T + 59_999));
    expect(before.status).toBe("critical");
    const after = seriesView(gpt4o(20), burning(20), [], opts(T + 60_000));
    expect(after.status).toBe("ok");
    expect(after.requests).toMatchObject({
      reset_since_report: true,
      // The last figures are kept for context.
      remaining: 20,
      used_pct: 96,
      resets_in_s: 0,
      exhaustion_eta_s: null,
      exhaustion_unknown: "reset_since_report",
    });
  });

  it("says unknown, with a reason, after one report and without a reset time", () => {
    const one = { requests: [[T, 200]] as [number, number][], tokens: [], credits: [] };
    expect(seriesView(gpt4o(200), one, [], opts(T + 1_000)).requests).toMatchObject({
      burn_per_s: null,
      burn_unknown: "too_few_reports",
      exhaustion_eta_s: null,
      exhaustion_unknown: "too_few_reports",
    });
    const noReset = seriesView(gpt4o(200, null), one, [], opts(T + 1_000)).requests;
    expect(noReset).toMatchObject({
      resets_at: null,
      resets_in_s: null,
      resets_unknown: "no_reset_time",
      exhaustion_unknown: "too_few_reports",
    });
    // No reset time, but burning: the time to exhaustion is known.
    const noResetBurning = seriesView(gpt4o(200, null), burning(200), [], opts(T)).requests;
    expect(noResetBurning).toMatchObject({ exhaustion_eta_s: 20, exhaustion_unknown: null });
    // Not falling: not burning.
    const flat = {
      requests: [
        [T - 10_000, 200],
        [T, 200],
      ] as [number, number][],
    };
    expect(
      seriesView(gpt4o(200), { ...flat, tokens: [], credits: [] }, [], opts(T)).requests,
    ).toMatchObject({ exhaustion_eta_s: null, exhaustion_unknown: "not_burning" });
  });

  it("gives one burn rate in its unit: credits per hour", () => {
    const credits = windowNow(
      "credits",
      { limit: 100, remaining: 40, reportedAt: T, resetsAt: null },
      [
        [T - 180_000, 40.1],
        [T, 40],
      ],
      T,
    );
    expect(credits).toMatchObject({ burn: 2, burn_unit: "credits/h", exhaustion_eta_s: 72_000 });
  });
});
