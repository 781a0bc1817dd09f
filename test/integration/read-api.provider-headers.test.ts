import { mkdirSync, mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  GEMINI_PAID_TIER_429,
  GROQ_DOCS_EXAMPLE,
  MISTRAL_CURRENT,
} from "../fixtures/providers/documented.js";
import { launchChromium, seriousViolations } from "../helpers/browser.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Issue 34's "done when", through the real pipeline (edge → queue → worker → Redis hot copy and
// ClickHouse → read API), with no injected derive function: reports carrying the providers'
// documented headers (or, for Gemini, only its 429 body) show the windows their provider meant
// in /api/v1/headroom, the exporter and the page. A header outside the allowlist is in neither.

let s: ReadStack;
let k: ProjectKeys;
let launched: Promise<Browser> | undefined;
const MARKER = `mk${uniqueId()}${uniqueId()}`;
const SHOTS = mkdtempSync(join(tmpdir(), "headroom-provider-headers-"));

// The report time: second-aligned, so that the RFC 3339 resets below are whole seconds after it.
const AT = Math.floor(Date.now() / 1000) * 1000;
const iso = (ms: number) => new Date(ms).toISOString();
const rfc3339 = (ms: number) => `${iso(ms).slice(0, 19)}Z`;

// Anthropic (docs.anthropic.com/en/api/rate-limits#response-headers): each dimension its own
// limit, remaining and RFC 3339 reset. The figures are the documented answer's; the resets are
// moved to just after the report, so that the windows are open while the test reads them.
const ANTHROPIC_RESETS = {
  requests: rfc3339(AT + 60_000),
  tokens: rfc3339(AT + 60_000),
  input_tokens: rfc3339(AT + 45_000),
  output_tokens: rfc3339(AT + 50_000),
};
const ANTHROPIC = {
  "anthropic-ratelimit-input-tokens-limit": "80000",
  "anthropic-ratelimit-input-tokens-remaining": "8000",
  "anthropic-ratelimit-input-tokens-reset": ANTHROPIC_RESETS.input_tokens,
  "anthropic-ratelimit-output-tokens-limit": "16000",
  "anthropic-ratelimit-output-tokens-remaining": "15000",
  "anthropic-ratelimit-output-tokens-reset": ANTHROPIC_RESETS.output_tokens,
  "Anthropic-RateLimit-Requests-Limit": "1000",
  "anthropic-ratelimit-requests-remaining": "999",
  "anthropic-ratelimit-requests-reset": ANTHROPIC_RESETS.requests,
  "anthropic-ratelimit-tokens-limit": "96000",
  "anthropic-ratelimit-tokens-remaining": "23000",
  "anthropic-ratelimit-tokens-reset": ANTHROPIC_RESETS.tokens,
};

// Groq: requests per day, tokens per minute, Go-duration resets; Mistral: per-minute requests
// and tokens, and tokens per month; Gemini: no headers, its 429 body names the exhausted quota and
// when to retry (the providers' documented examples, test/fixtures/providers/documented.ts).
const GROQ = GROQ_DOCS_EXAMPLE;
const MISTRAL = MISTRAL_CURRENT;
const GEMINI_429 = GEMINI_PAID_TIER_429;

// Azure OpenAI has sent -1 for figures it does not state.
const AZURE = {
  "x-ratelimit-limit-tokens": "-1",
  "x-ratelimit-remaining-tokens": "-1",
  "x-ratelimit-remaining-requests": "79",
};

/** Headers outside the allowlist, each holding the marker: dropped at the edge. */
const SECRET = {
  "set-cookie": `session=${MARKER}; Path=/`,
  "openai-organization": `org-${MARKER}`,
  "x-request-id": `req_${MARKER}`,
};

const report = (provider: string, model: string, more: Record<string, unknown>) => ({
  provider,
  model,
  app: "chat",
  timestamp: iso(AT),
  limits: {},
  ...more,
});

interface WindowOut {
  dimension: string;
  window: string | null;
  limit: number | null;
  remaining: number | null;
  used_pct: number | null;
  resets_at: string | null;
}
interface SeriesOut {
  provider: string;
  status: string;
  windows: WindowOut[];
}

let azureAnswer: { id: string; warnings?: { path: string; message: string }[] };

beforeAll(async () => {
  s = await startReadStack();
  k = await s.project();
  await s.send(k.report, [
    report("anthropic", "claude-sonnet-4", { headers: { ...ANTHROPIC, ...SECRET } }),
    report("groq", "llama-3.3-70b", { headers: GROQ }),
    report("mistral", "mistral-large", { headers: MISTRAL }),
    report("gemini", "gemini-2.5-flash", { error: GEMINI_429 }),
  ]);
  const res = await s.edge.app.inject({
    method: "POST",
    url: "/api/report",
    headers: { authorization: `Bearer ${k.report}`, "content-type": "application/json" },
    payload: JSON.stringify(report("azure", "gpt-4o", { headers: AZURE })),
  });
  expect(res.statusCode, res.body).toBe(200);
  azureAnswer = res.json();
  await s.stored(k.project, 5);
}, 120_000);

afterAll(async () => {
  await launched?.then((b) => b.close()).catch(() => {});
  await s?.close();
});

async function headroom(): Promise<{ body: string; series: Map<string, SeriesOut> }> {
  const res = await s.get("/api/v1/headroom", k.read);
  expect(res.statusCode, res.body).toBe(200);
  const { series } = res.json() as { series: SeriesOut[] };
  return { body: res.body, series: new Map(series.map((x) => [x.provider, x])) };
}

/** Every provider's series, once the hot copy holds all five. */
async function allSeries() {
  return eventually(
    async () => {
      const h = await headroom();
      expect([...h.series.keys()].sort()).toEqual([
        "anthropic",
        "azure",
        "gemini",
        "groq",
        "mistral",
      ]);
      return h;
    },
    { timeoutMs: 20_000, intervalMs: 250 },
  );
}

const shape = (w: WindowOut) => [w.dimension, w.window, w.limit, w.remaining];
const windowsOf = (series: Map<string, SeriesOut>, provider: string) => {
  const found = series.get(provider);
  if (!found) throw new Error(`no ${provider} series`);
  return found.windows;
};

describe("the providers' own headers, through the real pipeline", () => {
  it("Anthropic: input and output tokens windows with their own limits and RFC 3339 resets", async () => {
    const { series } = await allSeries();
    const windows = windowsOf(series, "anthropic");
    const byDimension = new Map(windows.map((w) => [w.dimension, w]));
    expect(windows.map(shape)).toEqual(
      expect.arrayContaining([
        ["input_tokens", "1m", 80_000, 8000],
        ["output_tokens", "1m", 16_000, 15_000],
        ["requests", "1m", 1000, 999],
        ["tokens", "1m", 96_000, 23_000],
      ]),
    );
    expect(windows).toHaveLength(4);
    for (const [dimension, reset] of Object.entries(ANTHROPIC_RESETS))
      expect(byDimension.get(dimension)?.resets_at, dimension).toBe(iso(Date.parse(reset)));
    expect(byDimension.get("input_tokens")?.used_pct).toBe(90);
    // The input-tokens window (90 % used) is the series' worst: critical by the default rules.
    expect(series.get("anthropic")?.status).toBe("critical");
  });

  it("Groq: a per-day requests window and a per-minute tokens window", async () => {
    const { series } = await allSeries();
    const windows = windowsOf(series, "groq");
    expect(windows.map(shape)).toEqual([
      ["requests", "1d", 14_400, 14_370],
      ["tokens", "1m", 18_000, 17_997],
    ]);
    expect(windows.map((w) => w.resets_at)).toEqual([iso(AT + 179_560), iso(AT + 7660)]);
  });

  it("Mistral: a month tokens window beside the minute ones", async () => {
    const { series } = await allSeries();
    const windows = windowsOf(series, "mistral");
    expect(windows.map(shape)).toEqual(
      expect.arrayContaining([
        ["tokens", "1m", 5_000_000, 4_999_911],
        ["requests", "1m", 720, 717],
        ["tokens", "1mo", 1_000_000_000, 999_967_993],
      ]),
    );
    expect(windows).toHaveLength(3);
  });

  it("Gemini: a report with only its 429 body gives an exhausted window, reset after retryDelay", async () => {
    const { series } = await allSeries();
    const windows = windowsOf(series, "gemini");
    expect(windows.map(shape)).toEqual([["input_tokens", "1m", 3_000_000, 0]]);
    expect(windows[0]?.resets_at).toBe(iso(AT + 19_000));
  });

  it("Azure: -1 is read as null, and the edge's 200 answer says so", async () => {
    const { series } = await allSeries();
    // Both tokens figures unknown: a window of nulls says nothing, so none is listed (and none
    // hides a figure); the requests window keeps its remaining, its limit unstated.
    expect(windowsOf(series, "azure").map(shape)).toEqual([["requests", "1m", null, 79]]);
    expect(azureAnswer.warnings?.map((w) => w.path)).toEqual([
      "headers.x-ratelimit-limit-tokens",
      "headers.x-ratelimit-remaining-tokens",
    ]);
    expect(azureAnswer.warnings?.[0]?.message).toMatch(/-1/);
  });

  it("exports one sample per window, labelled with its dimension and window", async () => {
    const { series } = await allSeries();
    const asked = Date.now();
    const res = await s.get("/api/v1/metrics", k.read);
    const answered = Date.now();
    expect(res.statusCode, res.body).toBe(200);
    const labelsOf = (gauge: string) =>
      res.body
        .split("\n")
        .filter((l) => l.startsWith(`${gauge}{`))
        .map((l) => {
          const provider = /provider="([^"]*)"/.exec(l)?.[1];
          const dimension = /dimension="([^"]*)"/.exec(l)?.[1];
          const window = /window="([^"]*)"/.exec(l)?.[1];
          return `${provider} ${dimension} ${window} ${l.slice(l.lastIndexOf(" ") + 1)}`;
        })
        .sort();
    // headroom_window_reset has a sample for every window, whatever its figures: 1 once its reset
    // has passed at the scrape (Groq's 7.66 s tokens window may have, on a slow machine), else 0.
    // A reset that falls while the scrape is answered may read either way.
    const resetAt = (w: { resets_at: string | null }) =>
      w.resets_at === null ? Number.POSITIVE_INFINITY : Date.parse(w.resets_at);
    const every = [...series.values()].flatMap((x) =>
      x.windows.map((w) => ({ label: `${x.provider} ${w.dimension} ${w.window}`, at: resetAt(w) })),
    );
    expect(every).toHaveLength(11);
    const reset = new Map(
      labelsOf("headroom_window_reset").map((l) => [l.slice(0, l.lastIndexOf(" ")), l.slice(-1)]),
    );
    expect([...reset.keys()].sort()).toEqual(every.map((w) => w.label).sort());
    for (const w of every) {
      if (w.at > asked && w.at <= answered) continue;
      expect(reset.get(w.label), w.label).toBe(w.at <= asked ? "1" : "0");
    }
    expect(labelsOf("headroom_limit").filter((l) => l.startsWith("anthropic "))).toEqual([
      "anthropic input_tokens 1m 80000",
      "anthropic output_tokens 1m 16000",
      "anthropic requests 1m 1000",
      "anthropic tokens 1m 96000",
    ]);
    expect(labelsOf("headroom_reset_timestamp_seconds")).toContain(
      `anthropic input_tokens 1m ${Date.parse(ANTHROPIC_RESETS.input_tokens) / 1000}`,
    );
    expect(labelsOf("headroom_remaining")).toEqual(
      expect.arrayContaining(["groq requests 1d 14370", "mistral tokens 1mo 999967993"]),
    );
  });

  it("finds no header outside the allowlist in the /headroom answer nor the exporter", async () => {
    const { body } = await allSeries();
    expect(body).not.toContain(MARKER);
    const metrics = await s.get("/api/v1/metrics", k.read);
    expect(metrics.statusCode).toBe(200);
    expect(metrics.body).not.toContain(MARKER);
    // The storage side (Redis, ClickHouse, logs) is report.provider-said.test.ts's; here, a
    // stored row of this project only confirms the dropped headers never reached it.
    const rows = await s.sql<{ h: string }>(
      `SELECT headers AS h FROM ${s.db}.reports_v WHERE project_id = {p:String} AND provider = 'anthropic'`,
      { p: k.project },
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.h).toContain("anthropic-ratelimit-input-tokens-limit");
    expect(rows[0]?.h).not.toContain(MARKER);
  });

  it("shows Anthropic's input and output tokens windows on the page, at 1280 and 390 px", async () => {
    await allSeries();
    await s.api.app.listen({ host: "127.0.0.1", port: 0 });
    const base = `http://127.0.0.1:${(s.api.app.server.address() as AddressInfo).port}`;
    launched ??= launchChromium();
    const browser = await launched;
    mkdirSync(SHOTS, { recursive: true });
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
        const rows = page.locator(
          '.series[data-provider="anthropic"] table.windows[data-field="windows"] tbody tr',
        );
        await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(4);
        const shown = await rows.evaluateAll((trs) =>
          trs.map((tr) => [
            tr.getAttribute("data-dimension"),
            tr.getAttribute("data-window"),
            tr.querySelector('[data-field="used_pct"]')?.textContent,
          ]),
        );
        // The most used first.
        expect(shown).toEqual([
          ["input_tokens", "1m", "90% used"],
          ["tokens", "1m", expect.stringMatching(/^76(\.\d)?% used$/)],
          ["output_tokens", "1m", expect.stringMatching(/^6(\.\d+)?% used$/)],
          ["requests", "1m", "0.1% used"],
        ]);
        // Its figures are in its windows alone: the card says how old they are.
        await expect
          .poll(() =>
            page.locator('.series[data-provider="anthropic"] p.details').last().textContent(),
          )
          .toMatch(/^figures \d+ s old/);
        // The chart over time draws the windows' used %: these reports carry no contract figures.
        await expect
          .poll(() => page.locator("#chart-used-empty").isHidden(), { timeout: 15_000 })
          .toBe(true);
        await page.screenshot({
          path: join(SHOTS, `provider-windows-${viewport.width}.png`),
          fullPage: true,
        });
        // The page redraws its cards on each refresh: a card replaced mid-shot is taken again.
        await vi.waitFor(
          () =>
            page
              .locator('.series[data-provider="anthropic"]')
              .screenshot({ path: join(SHOTS, `anthropic-card-${viewport.width}.png`) }),
          { timeout: 15_000, interval: 200 },
        );
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
});
