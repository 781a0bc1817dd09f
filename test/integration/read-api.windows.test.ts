import { mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlertsWorker, createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { createRuleStore } from "../../src/alerts/rule-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { launchChromium, SCREENSHOTS, seriousViolations } from "../helpers/browser.js";
import { eventually } from "../helpers/eventually.js";
import { groqLikeWindows } from "../helpers/groq-windows.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// A series with several windows, through the real edge, worker, Redis and ClickHouse: a report
// whose derived windows hold a requests-per-day window (critical) beside two tokens windows (per
// minute and per day, both fine) shows each window in /api/v1/headroom, in the exporter and on
// the page, and fires the alert of the day window only.
//
// The windows come from test/helpers/groq-windows.ts, injected as the ingest and alerts workers'
// derive function (issue 34 part A's parsers are not on this branch): everything else is the
// real write path. Once part A lands, Groq's headers in the report replace the injection.

let s: ReadStack;
let k: ProjectKeys;
let alerts: AlertsWorker;
let receiver: Receiver;
let secret = "";
let launched: Promise<Browser> | undefined;
const logger = createLogger("silent", "test");

const groqReport = (requestsRemaining: number, tokensRemaining: number, at: number) => ({
  provider: "groq",
  model: "llama-3.3-70b",
  app: "chat",
  timestamp: new Date(at).toISOString(),
  limits: {
    requests_limit: 1000,
    requests_remaining: requestsRemaining,
    tokens_limit: 6000,
    tokens_remaining: tokensRemaining,
    reset_requests_ms: 6 * 3_600_000,
    reset_tokens_ms: 30_000,
  },
});

interface WindowOut {
  dimension: string;
  window: string | null;
  limit: number | null;
  remaining: number | null;
  used_pct: number | null;
  resets_at: string | null;
  reset_since_report: boolean;
}

beforeAll(async () => {
  s = await startReadStack(
    { ALERTS_RULES_TTL_MS: "0" },
    { worker: { deriveWindows: groqLikeWindows } },
  );
  k = await s.project();
  receiver = await startReceiver(() => secret);
  const created = await createRuleStore(s.p.redis, s.p.config.QUEUE_PREFIX);
  // One rule per dimension, every window: only the requests day window is over 90 %.
  for (const metric of ["requests", "tokens"] as const) {
    const r = await created.create({
      project: k.project,
      metric,
      warn_pct: 70,
      critical_pct: 90,
      webhook: receiver.url,
    });
    if (metric === "requests") secret = r.secret;
  }
  alerts = createAlertsWorker({
    config: s.p.config,
    redis: s.p.redis,
    clickhouse: s.p.client,
    logger,
    deriveWindows: groqLikeWindows,
  });
  alerts.start();
  const now = Date.now();
  await s.send(k.report, [groqReport(10, 5400, now - 10_000), groqReport(5, 5400, now)]);
  await s.stored(k.project, 2);
}, 120_000);

afterAll(async () => {
  await launched?.then((b) => b.close()).catch(() => {});
  await alerts?.close();
  await receiver?.close();
  await s?.close();
});

async function windowsOf(key = k.read): Promise<{ status: string; windows: WindowOut[] }> {
  const res = await s.get("/api/v1/headroom", key);
  expect(res.statusCode, res.body).toBe(200);
  const [series] = (res.json() as { series: { status: string; windows: WindowOut[] }[] }).series;
  if (!series) throw new Error("no series yet");
  return series;
}

describe("a series with several windows", () => {
  it("lists each window in /api/v1/headroom, with the worst window's status", async () => {
    await eventually(async () => expect((await windowsOf()).windows).toHaveLength(3), {
      timeoutMs: 20_000,
      intervalMs: 250,
    });
    const series = await windowsOf();
    expect(
      series.windows.map((w) => [w.dimension, w.window, w.limit, w.remaining, w.used_pct]),
    ).toEqual([
      ["requests", "1d", 1000, 5, 99.5],
      ["tokens", "1m", 6000, 5400, 10],
      ["tokens", "1d", 600_000, 540_000, 10],
    ]);
    expect(series.status).toBe("critical");
    expect(series.windows[0]?.resets_at).not.toBeNull();
    expect(series.windows[2]?.resets_at).toBeNull();
  });

  it("exports one sample per window, labelled with dimension and window, from the hot copy", async () => {
    const res = await s.get("/api/v1/metrics", k.read);
    expect(res.statusCode, res.body).toBe(200);
    const used = res.body
      .split("\n")
      .filter((l) => l.startsWith("headroom_used_ratio{"))
      .map((l) =>
        l.replace(/^headroom_used_ratio\{provider="groq",model="llama-3.3-70b",app="chat",/, ""),
      );
    expect(used).toEqual([
      'kind="requests",dimension="requests",window="1d"} 0.995',
      'kind="tokens",dimension="tokens",window="1m"} 0.1',
      'kind="tokens",dimension="tokens",window="1d"} 0.1',
    ]);
  });

  it("fires the alert of the critical day window only, naming its window", async () => {
    await eventually(() => expect(receiver.deliveries.length).toBeGreaterThan(0), {
      timeoutMs: 20_000,
    });
    // Both reports are evaluated; nothing else may come.
    await eventually(
      async () => {
        const [count] = await s.sql<{ n: string }>(
          `SELECT count() AS n FROM ${s.db}.alert_events_v WHERE project_id = {p:String}`,
          { p: k.project },
        );
        expect(Number(count?.n)).toBe(1);
      },
      { timeoutMs: 20_000 },
    );
    expect(receiver.deliveries.every((d) => d.valid)).toBe(true);
    expect(receiver.deliveries.map((d) => d.json.data)).toMatchObject([
      { metric: "requests", window: "1d", level: "critical", used_pct: 99 },
    ]);
  });

  it("shows each window on the page, at desktop and phone widths", async () => {
    await s.api.app.listen({ host: "127.0.0.1", port: 0 });
    const base = `http://127.0.0.1:${(s.api.app.server.address() as AddressInfo).port}`;
    launched ??= launchChromium();
    const browser = await launched;
    mkdirSync(SCREENSHOTS, { recursive: true });
    for (const viewport of [
      { width: 1280, height: 900 },
      { width: 390, height: 844 },
    ]) {
      const context = await browser.newContext({ viewport });
      try {
        const page = await context.newPage();
        await page.goto(`${base}/#key=${encodeURIComponent(k.read)}`);
        // The cards show every series' windows at once (the table, its worst window a row).
        await page
          .locator("#views label")
          .filter({ hasText: /^Cards$/ })
          .click();
        const rows = page.locator('table.windows[data-field="windows"] tbody tr');
        await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(3);
        const shown = await rows.evaluateAll((trs) =>
          trs.map((tr) => [
            tr.getAttribute("data-dimension"),
            tr.getAttribute("data-window"),
            tr.querySelector('[data-field="used_pct"]')?.textContent,
            tr.querySelector('[data-field="resets_at"]')?.textContent?.startsWith("resets in") ??
              false,
          ]),
        );
        // The most used first; the day's tokens window states no reset.
        expect(shown).toEqual([
          ["requests", "1d", "99.5% used", true],
          ["tokens", "1m", "10% used", expect.any(Boolean)],
          ["tokens", "1d", "10% used", false],
        ]);
        await page.screenshot({
          path: join(SCREENSHOTS, `windows-${viewport.width}x${viewport.height}.png`),
          fullPage: true,
        });
        const widths = await page.evaluate(
          "[document.documentElement.scrollWidth, window.innerWidth]",
        );
        expect(widths).toEqual([viewport.width, viewport.width]);
        expect(await seriousViolations(page)).toEqual([]);
      } finally {
        await context.close();
      }
    }
  });

  it("keeps a window a newer report does not carry, through the worker's merge in Redis", async () => {
    // A project of its own, so the other tests' figures stay as they are in any order.
    const own = await s.project();
    await s.send(own.report, [groqReport(5, 5400, Date.now() - 1000)]);
    await s.stored(own.project, 1);
    // Tokens only, in a batch of its own: the day's requests window keeps its figures.
    await s.send(own.report, [
      {
        ...groqReport(0, 5000, Date.now()),
        limits: { tokens_limit: 6000, tokens_remaining: 5000, reset_tokens_ms: 30_000 },
      },
    ]);
    await s.stored(own.project, 2);
    await eventually(
      async () => {
        const series = await windowsOf(own.read);
        expect(series.windows.map((w) => [w.dimension, w.window, w.remaining])).toEqual([
          ["requests", "1d", 5],
          ["tokens", "1m", 5000],
          ["tokens", "1d", 500_000],
        ]);
        expect(series.status).toBe("critical");
      },
      { timeoutMs: 20_000, intervalMs: 250 },
    );
  });
});
