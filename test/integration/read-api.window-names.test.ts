import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../helpers/eventually.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Dimension names are the provider's, so a tenant's to choose (`x-ratelimit-limit-<anything>`):
// a report carries at most 16 windows, the rest dropped with a warning, and a series has at most
// 16 per point of /usage, so invented names cannot grow the windows' rollups and /usage's maps
// without bound. Through the real edge, worker, ClickHouse and read API.

let s: ReadStack;
let k: ProjectKeys;

beforeAll(async () => {
  s = await startReadStack();
  k = await s.project();
}, 120_000);

afterAll(async () => {
  await s?.close();
});

/** A report with `n` windows of dimension names never seen before (30 is 60 kept headers). */
function inventedWindows(n: number, at: number) {
  const headers: Record<string, string> = {};
  for (let i = 0; i < n; i++) {
    const name = `d${randomBytes(5).toString("hex")}`;
    headers[`x-ratelimit-limit-${name}`] = "1000";
    headers[`x-ratelimit-remaining-${name}`] = String(100 + i);
  }
  return {
    provider: "openai",
    model: "gpt-4o-mini",
    app: "names",
    timestamp: new Date(at).toISOString(),
    limits: {
      requests_limit: 100,
      requests_remaining: 40,
      tokens_limit: 10_000,
      tokens_remaining: 9_000,
      reset_requests_ms: 1_000,
      reset_tokens_ms: 1_000,
    },
    headers,
  };
}

describe("window names per series are bounded", () => {
  it("a report keeps 16 windows, its own figures first, and says what it dropped", async () => {
    const at = Math.floor(Date.now() / 60_000) * 60_000 + 1_000;
    const answers = [];
    for (let r = 0; r < 4; r++) {
      const res = await s.edge.app.inject({
        method: "POST",
        url: "/api/report",
        headers: { authorization: `Bearer ${k.report}`, "content-type": "application/json" },
        payload: JSON.stringify(inventedWindows(30, at + r)),
      });
      expect(res.statusCode, res.body).toBe(200);
      answers.push(res.json());
    }
    for (const a of answers) {
      expect(a.warnings).toContainEqual({
        path: "windows",
        message: expect.stringMatching(/^16 windows past the 16 a report may carry: dropped \(/),
      });
    }
    await s.stored(k.project, 4);
    // Stored: 16 windows a report, the contract's requests and tokens among them.
    const stored = await s.sql<{ n: number; known: number }>(
      `SELECT length(windows.dimension) AS n, has(windows.dimension, 'requests') + has(windows.dimension, 'tokens') AS known
       FROM ${s.db}.reports_v WHERE project_id = {p:String}`,
      { p: k.project },
    );
    expect(stored).toEqual(Array(4).fill({ n: 16, known: 2 }));

    // /usage: one point (the minute) of one series, with at most 16 dimensions.
    const from = new Date(at - 60_000).toISOString();
    await eventually(async () => {
      const res = await s.get(`/api/v1/usage?from=${from}&window=minute&group_by=app`, k.read);
      expect(res.statusCode, res.body).toBe(200);
      const points = res.json().points as { used_pct_by_dimension: Record<string, number> }[];
      expect(points.length).toBeGreaterThan(0);
      const names = new Set(points.flatMap((p) => Object.keys(p.used_pct_by_dimension)));
      expect(names.size).toBeGreaterThan(2);
      for (const p of points) {
        expect(Object.keys(p.used_pct_by_dimension).length).toBeLessThanOrEqual(16);
        // The contract's dimensions first, then the most used: requests (60 % used) is kept.
        expect(p.used_pct_by_dimension.requests).toBe(60);
      }
    });

    // /headroom: the series keeps 16 windows, as it did.
    const headroom = await s.get("/api/v1/headroom", k.read);
    const series = headroom.json().series as { windows: unknown[] }[];
    expect(series).toHaveLength(1);
    expect(series[0]?.windows.length).toBeLessThanOrEqual(16);
  }, 60_000);
});
