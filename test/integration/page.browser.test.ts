import { readFileSync, statSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { defaultPageDir } from "../../src/api/routes/page.js";
import { anthropicHeaders, GEMINI_PAID_TIER_429 } from "../fixtures/providers/documented.js";
import { launchChromium, SCREENSHOTS, screenshot, seriousViolations } from "../helpers/browser.js";
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

async function open(
  key: string | null,
  opts: { bypassCSP?: boolean; viewport?: { width: number; height: number } } = {},
  errors: string[] = [],
) {
  const context = await (await browser()).newContext({
    viewport: { width: 1280, height: 900 },
    ...opts,
  });
  const page = await context.newPage();
  pages.push(page);
  // Everything the browser would print in red: failed loads (a missing favicon too) and throws.
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`${m.text()} ${m.location().url}`);
  });
  page.on("pageerror", (e) => errors.push(e.message));
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
    await page.locator("#log-provider").selectOption("anthropic");
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(3);
    expect(
      new Set(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-provider")))),
    ).toEqual(new Set(["anthropic"]));
    await page.locator("#log-app").selectOption("chat");
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(1);
    expect(await rows.first().getAttribute("data-app")).toBe("chat");
    await page.locator("#log-provider").selectOption("");
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

describe("reports whose figures came from the provider's headers or error body", () => {
  it("show their windows and error in the log, their lowest headroom per model and their requests in spend", async () => {
    const mine = await s.project();
    const at = new Date().toISOString();
    const reset = `${new Date(Date.now() + 60_000).toISOString().slice(0, 19)}Z`;
    const said = (provider: string, model: string, more: Record<string, unknown>) => ({
      provider,
      model,
      app: "support-bot",
      timestamp: at,
      limits: {},
      ...more,
    });
    await s.send(mine.report, [
      said("anthropic", "claude-sonnet-4", { headers: anthropicHeaders(reset) }),
      said("anthropic", "claude-sonnet-4", { headers: anthropicHeaders(reset) }),
      said("gemini", "gemini-2.5-flash", { error: GEMINI_PAID_TIER_429 }),
    ]);
    await s.stored(mine.project, 3);
    const page = await open(mine.read);

    const log = page.locator("#log tbody tr[data-id]");
    await expect.poll(() => log.count(), { timeout: 15_000 }).toBe(3);
    const gemini = page.locator('#log tbody tr[data-provider="gemini"]');
    expect(await gemini.locator('[data-field="error"]').textContent()).toBe(
      "429 rate limited (RESOURCE_EXHAUSTED)",
    );
    expect(await gemini.locator('[data-dimension="input_tokens"]').textContent()).toBe(
      "input_tokens 1m: 0 of 3,000,000 left (100% used)",
    );
    const anthropic = page.locator('#log tbody tr[data-provider="anthropic"]').first();
    // The most used window first.
    expect(await anthropic.locator("[data-dimension]").first().textContent()).toBe(
      "output_tokens 1m: 95 of 8,000 left (98.8% used)",
    );

    const model = page.locator('#models tbody tr[data-provider="anthropic"]');
    await expect
      .poll(() => model.locator("td").nth(3).textContent(), { timeout: 15_000 })
      .toBe("1.2% left (output_tokens)");
    const spend = page.locator('#spend tbody tr[data-provider="anthropic"]');
    await expect
      .poll(() => spend.locator("td").nth(2).textContent(), { timeout: 15_000 })
      .toBe("2");
    expect(await seriousViolations(page)).toEqual([]);
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

describe("the page, at a glance", () => {
  const DESKTOP = { width: 1400, height: 1000 };
  const PHONE = { width: 390, height: 844 };
  let glance: ProjectKeys;
  /** When the burning series' second report was made: its burn is exactly 2.5 requests/s. */
  let t0: number;

  /** A report with both limits; reset times in ms, or null when the provider gave none. */
  function limited(p: {
    provider: string;
    model?: string;
    requests: number;
    tokens?: number;
    at: number;
    resetMs?: number | null;
    resetTokensMs?: number | null;
  }) {
    const r = report({
      provider: p.provider,
      model: p.model ?? "m1",
      app: "chat",
      requests: p.requests,
      tokens: p.tokens ?? 90_000,
      at: new Date(p.at).toISOString(),
    });
    return {
      ...r,
      limits: {
        ...r.limits,
        reset_requests_ms: p.resetMs === undefined ? 60_000 : p.resetMs,
        reset_tokens_ms: p.resetTokensMs === undefined ? 30_000 : p.resetTokensMs,
      },
    };
  }

  beforeAll(async () => {
    glance = await s.project();
    t0 = Date.now();
    const ok = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"].map(
      (provider) => limited({ provider, requests: 900, at: t0 - 5_000 }),
    );
    await s.send(glance.report, [
      ...ok,
      // One report, no reset time: neither the burn nor the reset is known.
      limited({
        provider: "india",
        requests: 800,
        at: t0 - 5_000,
        resetMs: null,
        resetTokensMs: null,
      }),
      // Two warnings and a critical one, named to sort last: only the page's order lifts them.
      limited({ provider: "yankee", model: "m1", requests: 250, at: t0 - 5_000 }),
      limited({ provider: "yankee", model: "m2", requests: 280, at: t0 - 5_000 }),
      // Burning: 150 requests and 1,000 tokens a minute; windows long enough to outlast the tests.
      ...[
        { requests: 200, tokens: 90_000, at: t0 - 60_000 },
        { requests: 50, tokens: 89_000, at: t0 },
      ].map((f) =>
        limited({ provider: "zulu", ...f, resetMs: 3_600_000, resetTokensMs: 30 * 60_000 }),
      ),
      // Not seen for 30 min.
      limited({ provider: "kilo", requests: 900, at: t0 - 30 * 60_000 }),
      // A provider hint: in use, no figures, nothing to draw.
      {
        provider: "lima",
        model: null,
        app: "chat",
        timestamp: new Date(t0 - 5_000).toISOString(),
        limits: {
          requests_limit: null,
          requests_remaining: null,
          tokens_limit: null,
          tokens_remaining: null,
          reset_requests_ms: null,
          reset_tokens_ms: null,
        },
      },
    ]);
    await s.stored(glance.project, 15);
  });

  const cardOrder = (page: Page) =>
    page
      .locator("article.card")
      .evaluateAll((cards) =>
        cards.map((c) => [c.getAttribute("data-provider"), c.getAttribute("data-status")]),
      );

  it("says how many series are in each status and puts the worst first, above the fold at 1400 × 1000", async () => {
    const errors: string[] = [];
    const page = await open(glance.read, { viewport: DESKTOP }, errors);
    const summary = page.locator("#summary");
    await expect
      .poll(() => summary.textContent(), { timeout: 15_000 })
      .toBe("1 critical, 2 warnings, 10 ok, 1 stale");
    await expect.poll(() => page.locator("article.card").count(), { timeout: 15_000 }).toBe(13);
    const order = await cardOrder(page);
    expect(order.slice(0, 2)).toEqual([
      ["zulu", "critical"],
      ["yankee", "warning"],
    ]);
    expect(order.at(-1)).toEqual(["kilo", "stale"]);
    const rank = { critical: 0, warning: 1, reset: 2, ok: 3, stale: 4 } as Record<string, number>;
    const ranks = order.map(([, status]) => rank[status ?? ""] ?? -1);
    expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
    // The critical card's heading is on the first screen, without scrolling.
    const box = await card(page, "zulu").locator("h3").boundingBox();
    expect(box).not.toBeNull();
    expect((box?.y ?? Number.POSITIVE_INFINITY) + (box?.height ?? 0)).toBeLessThan(DESKTOP.height);
    await page.locator("#log tbody tr[data-id]").first().waitFor();
    await screenshot(page, "glance-1400x1000");
    expect(await seriousViolations(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it("gives every burn rate and cost its unit, to sensible precision", async () => {
    const page = await open(glance.read, { viewport: DESKTOP });
    const zulu = card(page, "zulu");
    const burn = (metric: string) =>
      zulu.locator(`[data-metric="${metric}"] [data-field="burn_per_s"]`).textContent();
    await expect.poll(() => burn("requests"), { timeout: 15_000 }).toBe("burn 2.5 requests/s");
    // 1,000 tokens over 60 s: 16.666… per second.
    expect(await burn("tokens")).toBe("burn 16.7 tokens/s");
    // The requests run out (50 left at 2.5/s) long before their window resets.
    expect(
      await zulu.locator('[data-metric="requests"] [data-field="exhaustion_eta_s"]').textContent(),
    ).toMatch(/^exhausted( in \d+ s)?$/);

    const spend = page.locator("#spend tbody tr[data-provider]");
    await expect.poll(() => spend.count(), { timeout: 15_000 }).toBeGreaterThan(0);
    for (const row of await spend.all()) {
      const cells = await row.locator("td").allTextContents();
      expect(cells[1]).toMatch(/^[\d,.]+ credits$/);
      expect(cells[3]).toMatch(/^[\d,.]+ credits\/h$/);
    }
    const models = page.locator("#models tbody tr[data-provider]");
    await expect.poll(() => models.count(), { timeout: 15_000 }).toBeGreaterThan(0);
    for (const cost of await models.locator("td:last-child").allTextContents()) {
      expect(cost).toMatch(/^[\d,.]+ credits$/);
    }
    // No figure printed with four or more significant digits after its point ("28.7861/s").
    const texts = await page.locator("#dashboard td, #dashboard .details span").allTextContents();
    expect(texts.length).toBeGreaterThan(20);
    expect(texts.filter((t) => /\.0*[1-9]\d{3,}/.test(t))).toEqual([]);
  });

  it("says in words what is unknown, and 'not exhausted before the reset' only when the figures show it", async () => {
    const page = await open(glance.read, { viewport: DESKTOP });
    const india = card(page, "india");
    // Said once for the series, not under each of its three bars.
    const burn = india.locator('[data-field="burn"]');
    await expect
      .poll(() => burn.textContent(), { timeout: 15_000 })
      .toBe("Burn rate and time to exhaustion unknown: one recent report so far.");
    expect(await india.getByText("unknown", { exact: false }).count()).toBe(1);
    expect(await india.locator('[data-metric="requests"] .details').textContent()).toBe(
      "no reset time reported",
    );
    expect(await india.locator('[data-metric="tokens"] .details').textContent()).toBe(
      "no reset time reported",
    );

    // Every "not exhausted before the reset" on the page is backed by the API's figures.
    const api = (await s.get("/api/v1/headroom", glance.read)).json() as {
      at: string;
      series: {
        provider: string;
        model: string | null;
        app: string;
        [metric: string]: unknown;
      }[];
    };
    const claims = await page.locator('[data-field="exhaustion_eta_s"]').evaluateAll((spans) =>
      spans
        .filter((el) => el.textContent === "not exhausted before the reset")
        .map((el) => {
          const part = el.closest(".series");
          return [
            part?.getAttribute("data-provider"),
            part?.getAttribute("data-model"),
            part?.getAttribute("data-app"),
            el.closest("[data-metric]")?.getAttribute("data-metric"),
          ];
        }),
    );
    // zulu's tokens: 89,000 left at 16.7/s (89 min) outlast a 30 min window.
    expect(claims).toContainEqual(["zulu", "m1", "chat", "tokens"]);
    for (const [provider, model, app, metric] of claims) {
      const series = api.series.find(
        (x) => x.provider === provider && (x.model ?? "") === model && x.app === app,
      );
      const m = series?.[metric ?? ""] as {
        remaining: number;
        burn_per_s: number | null;
        resets_at: string | null;
      };
      expect(m.burn_per_s, `${provider} ${metric}`).toBeGreaterThan(0);
      expect(m.resets_at, `${provider} ${metric}`).not.toBeNull();
      expect(m.remaining / (m.burn_per_s ?? 1)).toBeGreaterThan(
        (Date.parse(m.resets_at ?? "") - Date.parse(api.at)) / 1000,
      );
    }
  });

  it("renders a status it does not know and null figures sensibly, in the order critical, warning, reset or unknown, ok, stale", async () => {
    const nulls = {
      limit: 1000,
      remaining: 500,
      used_pct: 50,
      resets_at: null,
      burn_per_s: null,
      exhaustion_eta_s: null,
    };
    const none = { ...nulls, limit: null, remaining: null, used_pct: null };
    const at = new Date().toISOString();
    const series = ["stale", "ok", "paused", "reset", "warning", "critical"].map((status) => ({
      provider: `p-${status}`,
      model: "m",
      app: "chat",
      status,
      last_seen: at,
      reported_at: at,
      credits_reported_at: null,
      requests: nulls,
      tokens: none,
      credits: none,
    }));
    const context = await (await browser()).newContext({ viewport: DESKTOP });
    const page = await context.newPage();
    pages.push(page);
    // The answer a newer API may give: the page is tested apart from today's figures.
    await page.route("**/api/v1/headroom*", (route) =>
      route.fulfill({ json: { at, series }, headers: { "cache-control": "no-store" } }),
    );
    await page.goto(`${base}/#key=${encodeURIComponent(glance.read)}`);
    await expect.poll(() => page.locator("article.card").count(), { timeout: 15_000 }).toBe(6);
    expect((await cardOrder(page)).map(([, status]) => status)).toEqual([
      "critical",
      "warning",
      "paused",
      "reset",
      "ok",
      "stale",
    ]);
    expect(await page.locator("#summary").textContent()).toBe(
      "1 critical, 1 warning, 1 paused, 1 reset, 1 ok, 1 stale",
    );
    expect(await card(page, "p-reset").locator("h3 .badge").textContent()).toBe("Reset");
    expect(await card(page, "p-paused").locator("h3 .badge").textContent()).toBe("Paused");
    const ok = card(page, "p-ok");
    expect(await ok.locator('[data-metric="requests"] .details').textContent()).toBe(
      "no reset time reported",
    );
    expect(await ok.locator('[data-field="burn"]').textContent()).toBe(
      "Burn rate and time to exhaustion unknown: one recent report so far.",
    );
    expect(await page.locator("#cards").textContent()).not.toContain("not exhausted");
  });

  it("draws a window without reports as 0, not as the window before it (defect 7)", async () => {
    const gaps = await s.project();
    const now = Date.now();
    // Every 5 minutes over the last hour, 3 reports each.
    const reports = [];
    for (let k = 0; k < 12; k++) {
      for (let j = 0; j < 3; j++) {
        reports.push(
          limited({
            provider: "openai",
            requests: 900 - k,
            at: now - 57 * 60_000 + k * 5 * 60_000 + j,
          }),
        );
      }
    }
    await s.send(gaps.report, reports);
    await s.stored(gaps.project, 36);
    const page = await open(gaps.read, { viewport: DESKTOP });
    await rangeLabel(page, "1 h").click();
    const counts = page.locator("#chart-reports");
    await expect.poll(() => counts.getAttribute("data-window"), { timeout: 15_000 }).toBe("minute");
    const drawn = async () =>
      ((await counts.getAttribute("data-drawn")) ?? "").split(",").filter(Boolean).map(Number);
    await expect
      .poll(async () => (await drawn()).reduce((a, b) => a + b, 0), { timeout: 15_000 })
      .toBe(36);
    const values = await drawn();
    // A value for every minute of the hour: twelve windows of 3, the others 0.
    expect(values.length).toBeGreaterThanOrEqual(60);
    expect(values.filter((v) => v === 3)).toHaveLength(12);
    expect(values.filter((v) => v === 0)).toHaveLength(values.length - 12);
    expect(await page.locator("#chart-reports-empty").isVisible()).toBe(false);
  });

  it("lists in the chart's legend only the series with data, each in its own colour, and speaks 24-hour UTC", async () => {
    const page = await open(glance.read, { viewport: DESKTOP });
    const legend = page.locator("#chart-legend li");
    // 13 series with figures in the range; the provider hint (lima) has none to draw.
    await expect.poll(() => legend.count(), { timeout: 15_000 }).toBe(13);
    const labels = await legend.allTextContents();
    expect(labels.some((l) => l.startsWith("lima"))).toBe(false);
    const colours = await legend.evaluateAll((items) =>
      items.map((li) => li.getAttribute("data-colour")),
    );
    expect(new Set(colours).size).toBe(colours.length);
    expect(await page.locator(".u-legend").count()).toBe(0);
    expect(await page.locator("#chart-used-empty").isVisible()).toBe(false);

    // The axis' ticks, the range's text and its inputs: 24-hour UTC.
    const ticks = page.locator("#chart-used");
    await expect.poll(() => ticks.getAttribute("data-ticks"), { timeout: 15_000 }).not.toBeNull();
    for (const tick of JSON.parse((await ticks.getAttribute("data-ticks")) ?? "[]") as string[]) {
      expect(tick).toMatch(/^(\d{2}-\d{2}|\d{2}:\d{2}|\d{2}-\d{2} \d{2}:\d{2})$/);
    }
    expect(await page.locator("#range-label").textContent()).toMatch(
      /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} to \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC, hour windows$/,
    );
    await rangeLabel(page, "Custom").click();
    for (const id of ["#custom-from", "#custom-to"]) {
      const input = page.locator(id);
      await expect
        .poll(() => input.inputValue(), { timeout: 15_000 })
        .toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/);
      expect(await input.getAttribute("type")).toBe("text");
    }
    // A custom range typed in that form is the range asked for.
    await page.locator("#custom-from").fill("2025-01-31 13:00");
    await page.locator("#custom-to").fill("2025-01-31 15:30");
    await page.getByRole("button", { name: "Apply" }).click();
    await expect
      .poll(() => page.locator("#chart-used").getAttribute("data-from"), { timeout: 15_000 })
      .toBe("2025-01-31T13:00:00.000Z");
  });

  it("fits a phone's width (390 × 844): nothing scrolls sideways but inside its own box", async () => {
    const errors: string[] = [];
    const page = await open(glance.read, { viewport: PHONE }, errors);
    await expect.poll(() => page.locator("article.card").count(), { timeout: 15_000 }).toBe(13);
    await expect.poll(() => page.locator("#chart-legend li").count(), { timeout: 15_000 }).toBe(13);
    await page.locator("#log tbody tr[data-id]").first().waitFor();
    const widths = () => page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]");
    expect(await widths()).toEqual([PHONE.width, PHONE.width]);
    expect(await page.locator("#summary").textContent()).toBe(
      "1 critical, 2 warnings, 10 ok, 1 stale",
    );
    expect((await cardOrder(page))[0]).toEqual(["zulu", "critical"]);
    await rangeLabel(page, "Custom").click();
    await page.locator("#custom-from").waitFor();
    expect(await widths()).toEqual([PHONE.width, PHONE.width]);
    await rangeLabel(page, "24 h").click();
    await screenshot(page, "glance-390x844");
    // What a phone shows at once: the top, and the chart with its legend and range buttons.
    await page.screenshot({ path: join(SCREENSHOTS, "glance-390x844-top.png") });
    await page.locator("#time-title").scrollIntoViewIfNeeded();
    await page.locator("#time-title").evaluate((el) => el.scrollIntoView());
    await page.screenshot({ path: join(SCREENSHOTS, "glance-390x844-chart.png") });
    expect(await seriousViolations(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it("refuses a missing or wrong key on the read API naming a read key", async () => {
    const missing = (await s.get("/api/v1/headroom")).json() as { error: string; message: string };
    expect(missing.error).toBe("missing_project_key");
    expect(missing.message).toContain("read key");
    expect(missing.message).not.toContain("project key");
    const wrong = (await s.get("/api/v1/headroom", `hrr_${"x".repeat(40)}`)).json() as {
      message: string;
    };
    expect(wrong.message).toBe("the read key is not valid");
  });
});
