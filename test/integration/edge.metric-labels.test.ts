import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clientReport,
  type EdgeFixture,
  startEdge,
  type TestKey,
} from "../helpers/edge-fixture.js";

// The edge's /metrics is shared by every tenant: its label values come from closed sets Headroom
// defines, never from what a report carries. A header name is the tenant's to choose.

let fx: EdgeFixture;
let key: TestKey;

beforeAll(async () => {
  fx = await startEdge();
  key = await fx.createKey();
});

afterAll(async () => {
  await fx?.close();
});

const scrape = async () => (await fx.edge.app.inject({ method: "GET", url: "/metrics" })).body;
/** Every Headroom sample's name and labels (the value left out; the process's own vary by themselves). */
const seriesOf = (text: string) =>
  new Set(
    text
      .split("\n")
      .filter((l) => l.startsWith("headroom_"))
      .map((l) => l.slice(0, l.lastIndexOf(" "))),
  );

/** A report whose headers are `count` unreadable rate-limit headers of names never seen before. */
const junkHeaders = (count: number) =>
  clientReport({
    headers: Object.fromEntries(
      Array.from({ length: count }, () => [
        `x-ratelimit-limit-${randomBytes(6).toString("hex")}`,
        "junk",
      ]),
    ),
  });

describe("warnings are counted by kind, never by the path a tenant chose", () => {
  it("many reports with random header names leave the edge's label set as it was", async () => {
    // One of each answer first, so that the requests counter's own labels are there.
    expect((await fx.post(junkHeaders(1), { key: key.key })).statusCode).toBe(200);
    const batch = (n: number) =>
      fx.post(
        Array.from({ length: n }, () => junkHeaders(30)),
        {
          key: key.key,
          url: "/api/reports",
        },
      );
    expect((await batch(1)).statusCode).toBe(200);
    await scrape();
    const before = seriesOf(await scrape());

    const one = await fx.post(junkHeaders(30), { key: key.key });
    expect(one.statusCode).toBe(200);
    expect(one.json().warnings).toHaveLength(30);
    for (let i = 0; i < 10; i++) expect((await batch(20)).statusCode).toBe(200);

    const text = await scrape();
    const after = seriesOf(text);
    expect([...after].filter((s) => !before.has(s))).toEqual([]);
    expect(text).not.toMatch(/x-ratelimit-limit-[0-9a-f]{12}/);
    // 6,030 warnings, all under one kind of the closed set docs/prometheus.md lists.
    const kinds = [...text.matchAll(/^headroom_report_warnings_total\{kind="([^"]*)"\}/gm)].map(
      (m) => m[1],
    );
    expect(kinds.sort()).toEqual(
      [
        "app",
        "credits",
        "error",
        "headers",
        "limits",
        "model",
        "other",
        "parser",
        "timestamp",
        "windows",
      ].sort(),
    );
    const headers = /^headroom_report_warnings_total\{kind="headers"\} (\d+)$/m.exec(text);
    expect(Number(headers?.[1])).toBeGreaterThanOrEqual(6_031);
  });
});
