import { readFileSync, statSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { defaultPageDir } from "../../src/api/routes/page.js";
import { launchChromium, screenshot, seriousViolations } from "../helpers/browser.js";
import { eventually } from "../helpers/eventually.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// The headroom page in a real browser (Debian's chromium), on a read API listening on a port,
// over reports sent through the real edge and stored by the real worker.

let s: ReadStack;
let base: string;
/** Launched by the first test that needs it: without chromium, each such test fails saying so. */
let launched: Promise<Browser> | undefined;
const browser = () => {
  launched ??= launchChromium();
  return launched;
};
let k: ProjectKeys;
const pages: Page[] = [];

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

function report(p: {
  provider: string;
  model: string;
  app: string;
  requests: number;
  tokens: number;
  at?: string;
  cost?: number;
}) {
  return {
    app: p.app,
    provider: p.provider,
    model: p.model,
    timestamp: p.at ?? new Date().toISOString(),
    limits: {
      requests_limit: 1000,
      requests_remaining: p.requests,
      tokens_limit: 100_000,
      tokens_remaining: p.tokens,
      reset_requests_ms: 60_000,
      reset_tokens_ms: 30_000,
    },
    credits: { credits_limit: 100, credits_remaining: 40, request_cost: p.cost ?? 0.5 },
  };
}

beforeAll(async () => {
  s = await startReadStack();
  await s.api.app.listen({ host: "127.0.0.1", port: 0 });
  base = `http://127.0.0.1:${(s.api.app.server.address() as AddressInfo).port}`;
  k = await s.project();
  await s.send(k.report, [
    report({
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      requests: 900,
      tokens: 90_000,
      at: ago(3 * 3_600_000),
    }),
    report({
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      requests: 700,
      tokens: 80_000,
      at: ago(3_600_000),
    }),
    report({ provider: "openai", model: "gpt-4o", app: "chat", requests: 600, tokens: 75_000 }),
    report({
      provider: "anthropic",
      model: "claude-sonnet-4",
      app: "search",
      requests: 950,
      tokens: 99_000,
      at: ago(2 * 3_600_000),
    }),
    report({
      provider: "anthropic",
      model: "claude-sonnet-4",
      app: "search",
      requests: 940,
      tokens: 98_000,
    }),
    report({
      provider: "anthropic",
      model: "claude-haiku-4",
      app: "chat",
      requests: 800,
      tokens: 60_000,
      at: ago(30 * 60_000),
    }),
  ]);
  await s.stored(k.project, 6);
});

afterEach(async (ctx) => {
  for (const page of pages.splice(0)) {
    await screenshot(page, ctx.task.name.replace(/[^a-z0-9]+/gi, "-").toLowerCase()).catch(
      () => {},
    );
    await page.context().close();
  }
});

afterAll(async () => {
  await launched?.then((b) => b.close()).catch(() => {});
  await s?.close();
});

async function open(key: string | null, opts: { bypassCSP?: boolean } = {}) {
  const context = await (await browser()).newContext({
    viewport: { width: 1280, height: 900 },
    ...opts,
  });
  const page = await context.newPage();
  pages.push(page);
  await page.goto(key === null ? `${base}/` : `${base}/#key=${encodeURIComponent(key)}`);
  return page;
}

/** The range picker's choices are radios inside their labels: a person clicks the label. */
const rangeLabel = (page: Page, text: string) =>
  page.locator("#ranges label").filter({ hasText: new RegExp(`^${text}$`) });

const card = (page: Page, provider: string) =>
  page.locator(`article.card[data-provider="${provider}"]`);

describe("the headroom page", () => {
  it("shows for each provider the figures /api/v1/headroom returns, with the key kept out of every URL", async () => {
    const urls: string[] = [];
    const context = await (await browser()).newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    pages.push(page);
    page.on("request", (r) => urls.push(r.url()));
    await page.goto(`${base}/#key=${encodeURIComponent(k.read)}`);
    await card(page, "openai").waitFor();
    await card(page, "anthropic").waitFor();

    const api = (await s.get("/api/v1/headroom", k.read)).json() as {
      series: {
        provider: string;
        model: string | null;
        app: string;
        status: string;
        [metric: string]: unknown;
      }[];
    };
    expect(api.series).toHaveLength(3);
    for (const series of api.series) {
      const part = card(page, series.provider).locator(
        `.series[data-model="${series.model}"][data-app="${series.app}"]`,
      );
      await expect
        .poll(() => part.getAttribute("data-status"), { timeout: 15_000 })
        .toBe(series.status);
      for (const metric of ["requests", "tokens", "credits"]) {
        const figures = series[metric] as Record<string, number | null>;
        for (const field of ["remaining", "limit", "used_pct"]) {
          const shown = await part
            .locator(`[data-metric="${metric}"] [data-field="${field}"]`)
            .getAttribute("data-value");
          expect(shown, `${series.provider} ${series.model} ${metric}.${field}`).toBe(
            String(figures[field]),
          );
        }
      }
      // In words too, not by colour alone.
      await expect
        .poll(() => part.locator(".badge").textContent(), { timeout: 15_000 })
        .toBe(
          { ok: "OK", warning: "Warning", critical: "Critical", stale: "Stale" }[series.status],
        );
    }
    // The text a person reads: 600 of 1,000 requests left.
    expect(
      await card(page, "openai")
        .locator('[data-metric="requests"] [data-field="limit"]')
        .textContent(),
    ).toBe("1,000");

    // The key went from the fragment to the tab's session storage; no URL carried it.
    expect(new URL(page.url()).hash).toBe("");
    expect(await page.evaluate('sessionStorage.getItem("headroom.readKey")')).toBe(k.read);
    expect(urls.length).toBeGreaterThan(3);
    for (const url of urls) expect(url).not.toContain(k.read);

    // The page's script and how soon the figures showed (docs/page.md: the page's figures).
    const dir = defaultPageDir();
    const scripts = [
      "main.js",
      "api.js",
      "dom.js",
      "format.js",
      "key.js",
      "now-cards.js",
      "over-time.js",
      "tables.js",
      "vendor/uPlot.iife.min.js",
    ];
    const gz = scripts.reduce(
      (n, f) => n + gzipSync(readFileSync(join(dir, f)), { level: 9 }).length,
      0,
    );
    const raw = scripts.reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    const first = await page.evaluate("document.documentElement.dataset.firstFiguresMs");
    console.log(
      `page: script ${(raw / 1024).toFixed(1)} KB, ${(gz / 1024).toFixed(1)} KB gzip; first figures ${first} ms after navigation`,
    );
    expect(Number(first)).toBeGreaterThan(0);
  });

  it("asks for the range it shows: a range button and a drag on the chart change the query and the axis", async () => {
    const page = await open(k.read);
    const chart = page.locator("#chart-used");
    await expect.poll(() => chart.getAttribute("data-x-max"), { timeout: 15_000 }).not.toBeNull();
    const span = async () =>
      Number(await chart.getAttribute("data-x-max")) -
      Number(await chart.getAttribute("data-x-min"));
    expect(await span()).toBeGreaterThanOrEqual(24 * 3_600_000);
    expect(await span()).toBeLessThan(26 * 3_600_000);

    // The span of the last usage query the page sent.
    const asked: URL[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/api/v1/usage")) asked.push(new URL(r.url()));
    });
    const askedSpan = () => {
      const q = asked.at(-1);
      return q
        ? Date.parse(q.searchParams.get("to") ?? "") - Date.parse(q.searchParams.get("from") ?? "")
        : 0;
    };

    // 7 days, picked with the mouse.
    await rangeLabel(page, "7 d").click();
    await expect.poll(askedSpan, { timeout: 15_000 }).toBe(7 * 86_400_000);
    await expect.poll(span, { timeout: 15_000 }).toBeGreaterThanOrEqual(7 * 86_400_000);
    await expect.poll(() => chart.getAttribute("data-window"), { timeout: 15_000 }).toBe("hour");

    // 1 hour, with the keyboard: the range picker is one group of radios.
    await page.getByLabel("7 d").focus();
    for (const _ of [1, 2, 3]) await page.keyboard.press("ArrowLeft");
    expect(await page.getByLabel("1 h").isChecked()).toBe(true);
    await expect.poll(askedSpan, { timeout: 15_000 }).toBe(3_600_000);
    await expect.poll(span, { timeout: 15_000 }).toBeLessThanOrEqual(2 * 3_600_000);
    await expect.poll(() => chart.getAttribute("data-window"), { timeout: 15_000 }).toBe("minute");

    // 24 hours again, then a drag across the chart's middle asks for that part only.
    await rangeLabel(page, "24 h").click();
    await expect.poll(span, { timeout: 15_000 }).toBeGreaterThanOrEqual(24 * 3_600_000);
    const over = chart.locator(".u-over");
    await over.scrollIntoViewIfNeeded();
    const box = await over.boundingBox();
    if (!box) throw new Error("the chart has no plotting area");
    await page.mouse.move(box.x + box.width * 0.25, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    await expect.poll(askedSpan, { timeout: 15_000 }).toBeLessThan(8 * 3_600_000);
    expect(askedSpan()).toBeGreaterThan(4 * 3_600_000);
    expect(await page.getByLabel("Custom").isChecked()).toBe(true);
    await expect.poll(span, { timeout: 15_000 }).toBeLessThan(9 * 3_600_000);
  });

  it("filters the report log by provider and by app", async () => {
    const page = await open(k.read);
    const rows = page.locator("#log tbody tr[data-id]");
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(6);
    await page.getByLabel("Provider").selectOption("anthropic");
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(3);
    expect(
      new Set(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-provider")))),
    ).toEqual(new Set(["anthropic"]));
    await page.getByLabel("App").selectOption("chat");
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(1);
    expect(await rows.first().getAttribute("data-app")).toBe("chat");
    await page.getByLabel("Provider").selectOption("");
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(4);
  });

  it("shows a report that crosses a threshold within seconds, without a reload", async () => {
    const mine = await s.project();
    await s.send(mine.report, [
      report({ provider: "groq", model: "llama", app: "chat", requests: 500, tokens: 90_000 }),
    ]);
    await s.stored(mine.project, 1);
    const page = await open(mine.read);
    await expect
      .poll(() => card(page, "groq").getAttribute("data-status"), { timeout: 15_000 })
      .toBe("ok");
    await page.evaluate("window.notReloaded = true");

    await s.send(mine.report, [
      report({ provider: "groq", model: "llama", app: "chat", requests: 50, tokens: 90_000 }),
    ]);
    await eventually(
      async () => expect(await card(page, "groq").getAttribute("data-status")).toBe("critical"),
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    expect(await card(page, "groq").locator(".badge").first().textContent()).toBe("Critical");
    expect(
      await card(page, "groq")
        .locator('[data-metric="requests"] [data-field="remaining"]')
        .getAttribute("data-value"),
    ).toBe("50");
    expect(await page.evaluate("window.notReloaded")).toBe(true);
  });

  it("asks for a key when opened without one, and says so when a key is revoked", async () => {
    const page = await open(null);
    await expect.poll(() => page.locator("#signin").isVisible(), { timeout: 15_000 }).toBe(true);
    expect(await page.locator("#dashboard").isVisible()).toBe(false);

    const gone = await s.project();
    const [info] = (await s.edge.keyStore.list(gone.project)).filter((x) => x.scope === "read");
    expect(await s.edge.keyStore.revoke(info?.keyId ?? "")).toBe(true);
    await expect
      .poll(async () => (await s.get("/api/v1/headroom", gone.read)).statusCode)
      .toBe(401);

    await page.getByLabel("Read key").fill(gone.read);
    await page.getByRole("button", { name: "Open" }).click();
    const message = page.locator("#key-error");
    await expect
      .poll(() => message.textContent(), { timeout: 15_000 })
      .toContain("wrong or has been revoked");
    expect(await page.locator("#signin").isVisible()).toBe(true);
    expect(await page.evaluate('sessionStorage.getItem("headroom.readKey")')).toBeNull();

    // A report key is not a read key.
    await page.getByLabel("Read key").fill(k.report);
    await page.getByRole("button", { name: "Open" }).click();
    await expect.poll(() => message.textContent(), { timeout: 15_000 }).toContain("report key");

    // And another key opens the page.
    await page.getByLabel("Read key").fill(k.read);
    await page.getByRole("button", { name: "Open" }).click();
    await card(page, "openai").waitFor();
    expect(await page.locator("#signin").isVisible()).toBe(false);
  });

  it("has no serious or critical accessibility violation (axe-core), signed in or not", async () => {
    const page = await open(k.read);
    await card(page, "openai").waitFor();
    await expect
      .poll(() => page.locator("#log tbody tr[data-id]").count(), { timeout: 15_000 })
      .toBe(6);
    expect(await seriousViolations(page)).toEqual([]);
    const signin = await open(null);
    await signin.locator("#key-input").waitFor();
    expect(await seriousViolations(signin)).toEqual([]);
  });
});

describe("the page's files", () => {
  it("are served open, gzipped when asked, with a CSP that allows scripts from the read API only", async () => {
    const index = await s.get("/", undefined, { "accept-encoding": "gzip" });
    expect(index.statusCode).toBe(200);
    expect(index.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(index.headers["content-encoding"]).toBe("gzip");
    expect(index.headers["content-security-policy"]).toContain("script-src 'self'");
    const plain = await s.get("/page/main.js");
    expect(plain.statusCode).toBe(200);
    expect(plain.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(plain.headers["content-encoding"]).toBeUndefined();
    expect(plain.body).toContain("takeKey");
    const again = await s.get("/page/main.js", undefined, {
      "if-none-match": String(plain.headers.etag),
    });
    expect(again.statusCode).toBe(304);
    expect((await s.get("/page/nothing.js")).json()).toMatchObject({ error: "not_found" });
    expect((await s.get("/page/../package.json")).statusCode).toBe(404);
    // The read routes still want a key.
    expect((await s.get("/api/v1/headroom")).statusCode).toBe(401);
  });
});

describe("alert events", () => {
  it("are listed newest first, as /api/v1/alerts/events answers, and marked in the range", async () => {
    const mine = await s.project();
    await s.send(mine.report, [
      report({ provider: "openai", model: "gpt-4o", app: "chat", requests: 50, tokens: 90_000 }),
    ]);
    await s.stored(mine.project, 1);
    const values = (["warning", "critical", "resolved"] as const).map((level, i) => ({
      event_id: `evt_${(i + 1).toString(16).padStart(32, "0")}`,
      rule_id: "alr_1",
      project_id: mine.project,
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      metric: "requests",
      level,
      used_pct: [75, 95, 40][i],
      limit: 1000,
      remaining: [250, 50, 600][i],
      reset_ms: null,
      burn_per_s: null,
      exhaustion_eta_s: null,
      warn_pct: 70,
      critical_pct: 90,
      report_id: "00000000-0000-7000-8000-000000000000",
      at: ago((3 - i) * 3_600_000)
        .replace("T", " ")
        .replace("Z", ""),
    }));
    await s.p.client.insert({ table: `${s.db}.alert_events`, format: "JSONEachRow", values });
    const api = (await s.get("/api/v1/alerts/events", mine.read)).json() as {
      items: { id: string; level: string }[];
    };
    expect(api.items.map((e) => e.level)).toEqual(["resolved", "critical", "warning"]);

    const page = await open(mine.read);
    const rows = page.locator("#alerts tbody tr[data-id]");
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(3);
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-id")))).toEqual(
      api.items.map((e) => e.id),
    );
    expect(await rows.nth(1).locator("td").nth(1).textContent()).toBe("critical");
    await expect
      .poll(() => page.locator("#events-in-range li").count(), { timeout: 15_000 })
      .toBe(3);
  });
});
