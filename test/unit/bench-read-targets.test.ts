import { describe, expect, it } from "vitest";
import {
  CLOSED_TARGETS,
  dashboardTargets,
  pageRange,
  type ReadTarget,
  targetUrl,
} from "../../bench/read-targets.js";
// The dashboards model asks what the page (src/page/client/main.ts) asks: its range computed per
// poll as currentRange does, its parameters in its order, encoded as its queryString
// (src/page/client/api.ts, URLSearchParams, empty values left out) encodes them.

const NOW = Date.parse("2026-11-29T12:34:56.789Z");
const byName = (targets: ReadTarget[]) => new Map(targets.map((t) => [t.name, t]));

describe("bench read targets", () => {
  it("pageRange spans the 24 h ending at the next whole minute", () => {
    expect(pageRange(NOW)).toEqual({
      from: "2026-11-28T12:35:00.000Z",
      to: "2026-11-29T12:35:00.000Z",
    });
    // On a whole minute, that minute ends the range.
    expect(pageRange(Date.parse("2026-11-29T12:35:00.000Z")).to).toBe("2026-11-29T12:35:00.000Z");
  });

  it("the dashboards' /usage asks the page's range grouped by provider and model, with no window", () => {
    const usage = byName(dashboardTargets(5)).get("usage") as ReadTarget;
    const url = targetUrl(usage, NOW);
    expect(url).toBe(
      "/api/v1/usage?from=2026-11-28T12%3A35%3A00.000Z&to=2026-11-29T12%3A35%3A00.000Z&group_by=provider%2Cmodel",
    );
    expect(url).not.toContain("window");
  });

  it("each target's URL is the one the page's queryString makes for the same poll", () => {
    const targets = byName(dashboardTargets(5));
    const from = "from=2026-11-28T12%3A35%3A00.000Z";
    const to = "to=2026-11-29T12%3A35%3A00.000Z";
    // What main.ts's refreshHeadroom, refreshRange and refreshLog (first page, no filter) ask.
    const page: Record<string, string> = {
      headroom: "/api/v1/headroom",
      usage: `/api/v1/usage?${from}&${to}&group_by=provider%2Cmodel`,
      "alerts-events": `/api/v1/alerts/events?${from}&${to}&limit=100`,
      spend: `/api/v1/spend?${from}&${to}`,
      reports: `/api/v1/reports?limit=20&${from}&${to}`,
    };
    for (const [name, url] of Object.entries(page)) {
      expect(targetUrl(targets.get(name) as ReadTarget, NOW), name).toBe(url);
    }
  });

  it("a 7d page asks the 7 days to the next whole minute", () => {
    const usage = byName(dashboardTargets(0, 7 * 86_400_000)).get("usage") as ReadTarget;
    expect(targetUrl(usage, NOW)).toBe(
      "/api/v1/usage?from=2026-11-22T12%3A35%3A00.000Z&to=2026-11-29T12%3A35%3A00.000Z&group_by=provider%2Cmodel",
    );
  });

  it("the range moves with the clock from one poll to the next", () => {
    const usage = byName(dashboardTargets(0)).get("usage") as ReadTarget;
    const a = targetUrl(usage, NOW);
    const b = targetUrl(usage, NOW + 60_000);
    expect(b).not.toBe(a);
    expect(b).toContain("to=2026-11-29T12%3A36%3A00.000Z");
  });

  it("dashboards poll the page's endpoints at its cadence, and the rolling minute query apart", () => {
    const targets = dashboardTargets(5);
    expect(targets.map((t) => [t.name, t.everyMs, t.readers])).toEqual([
      ["headroom", 2_000, undefined],
      ["usage", 6_000, undefined],
      ["alerts-events", 6_000, undefined],
      ["spend", 6_000, undefined],
      ["reports", 6_000, undefined],
      ["usage-rolling-minute", 6_000, 5],
    ]);
    const rolling = byName(targets).get("usage-rolling-minute") as ReadTarget;
    expect(targetUrl(rolling, NOW)).toBe("/api/v1/usage?window=minute&group_by=provider,model");
    expect(dashboardTargets(0).map((t) => t.name)).not.toContain("usage-rolling-minute");
    // What the page polls revalidates as its browser does; the API client's query does not.
    expect(targets.filter((t) => t.revalidate).map((t) => t.name)).toEqual([
      "headroom",
      "usage",
      "alerts-events",
      "spend",
      "reports",
    ]);
  });

  it("closed loops ask /headroom and the rolling minute query, fixed paths wrk can send", () => {
    expect(CLOSED_TARGETS.map((t) => targetUrl(t, NOW))).toEqual([
      "/api/v1/headroom",
      "/api/v1/usage?window=minute&group_by=provider,model",
    ]);
    expect(CLOSED_TARGETS.every((t) => t.query === undefined)).toBe(true);
  });
});
