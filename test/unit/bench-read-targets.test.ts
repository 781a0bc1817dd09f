import { describe, expect, it } from "vitest";
import {
  CLOSED_TARGETS,
  dashboardTargets,
  type ReadTarget,
  targetUrl,
} from "../../bench/read-targets.js";
// The dashboards model asks what the page (src/page/client/main.ts) asks: its range as the page
// names it (`last`, a preset), its parameters in its order, encoded as its queryString
// (src/page/client/api.ts, URLSearchParams, empty values left out) encodes them.

const byName = (targets: ReadTarget[]) => new Map(targets.map((t) => [t.name, t]));

describe("bench read targets", () => {
  it("the dashboards' /usage asks the last 24 h grouped by provider and model, with no window", () => {
    const usage = byName(dashboardTargets(5)).get("usage") as ReadTarget;
    const url = targetUrl(usage);
    expect(url).toBe("/api/v1/usage?last=24h&group_by=provider%2Cmodel");
    expect(url).not.toContain("window");
  });

  it("each target's URL is the one the page's queryString makes for the same poll", () => {
    const targets = byName(dashboardTargets(5));
    // What main.ts's refreshHeadroom, refreshRange and refreshLog (first page, no filter) ask.
    const page: Record<string, string> = {
      headroom: "/api/v1/headroom",
      usage: "/api/v1/usage?last=24h&group_by=provider%2Cmodel",
      "alerts-events": "/api/v1/alerts/events?last=24h&limit=100",
      spend: "/api/v1/spend?last=24h",
      reports: "/api/v1/reports?limit=20&last=24h",
    };
    for (const [name, url] of Object.entries(page)) {
      expect(targetUrl(targets.get(name) as ReadTarget), name).toBe(url);
    }
  });

  it("a 7d page asks the last 7 days", () => {
    const usage = byName(dashboardTargets(0, "7d")).get("usage") as ReadTarget;
    expect(targetUrl(usage)).toBe("/api/v1/usage?last=7d&group_by=provider%2Cmodel");
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
    expect(targetUrl(rolling)).toBe("/api/v1/usage?window=minute&group_by=provider,model");
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
    expect(CLOSED_TARGETS.map((t) => targetUrl(t))).toEqual([
      "/api/v1/headroom",
      "/api/v1/usage?window=minute&group_by=provider,model",
    ]);
    expect(CLOSED_TARGETS.every((t) => t.query === undefined)).toBe(true);
  });
});
