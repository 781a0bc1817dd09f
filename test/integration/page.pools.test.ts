import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, SCREENSHOTS, screenshot, seriousViolations } from "../helpers/browser.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Pools on the headroom page (docs/pools.md, docs/page.md), in Debian's chromium, over reports sent
// through the real edge and worker: three apps calling gpt-4o through one OpenAI organisation are
// one part of the openai card, its members listed in it, with the newest report's figure (not
// three parts, each its own app's); "By app" shows the three series again; the table has one row
// per pool. At 1400 × 1000 and 390 × 844 nothing scrolls sideways, nothing overlaps, and long
// names are cut with their whole text as a title.

const ORG = "org-Pg7Ws2QxLmNb4vRtYuIoPaSd";
const SECRET = "page-pools-secret-0123456789abcdef0123";
const DESKTOP = { width: 1400, height: 1000 };
const PHONE = { width: 390, height: 844 };
/** An app name near the report API's bound (128): cut on the page, whole in its title. */
const LONG_APP = `nightly-summaries-of-the-customer-support-knowledge-base-${"x".repeat(40)}`;
/** A pool label at the bound (64 characters). */
const LABEL = "groq-shared-production-pool-for-every-team-of-the-organisation-1";

let s: ReadStack;
let base: string;
let k: ProjectKeys;
let launched: Promise<Browser> | undefined;
const browser = () => {
  launched ??= launchChromium();
  return launched;
};
const pages: Page[] = [];
const now = Date.now();
const iso = (agoMs: number) => new Date(now - agoMs).toISOString();

/** A report with both limits; resets two hours off, so no window resets while the tests read. */
function report(p: {
  provider: string;
  model: string;
  app: string;
  agoMs: number;
  requests: [number, number];
  tokens: [number, number];
  extra?: object;
}) {
  return {
    provider: p.provider,
    model: p.model,
    app: p.app,
    timestamp: iso(p.agoMs),
    limits: {
      requests_remaining: p.requests[0],
      requests_limit: p.requests[1],
      tokens_remaining: p.tokens[0],
      tokens_limit: p.tokens[1],
      reset_requests_ms: 7_200_000,
      reset_tokens_ms: 7_200_000,
    },
    ...p.extra,
  };
}

/** A gpt-4o report of `app` through the organisation (the provider's headers forwarded). */
const openai = (app: string, agoMs: number, tokens: number) =>
  report({
    provider: "openai",
    model: "gpt-4o",
    app,
    agoMs,
    requests: [490, 500],
    tokens: [tokens, 10_000],
    extra: { headers: { "openai-organization": ORG, "x-request-id": `req_${app}` } },
  });

const groq = (app: string, agoMs: number, requests: number, pool?: string) =>
  report({
    provider: "groq",
    model: "llama-3.3-70b-versatile",
    app,
    agoMs,
    requests: [requests, 100],
    tokens: [90_000, 100_000],
    extra: pool ? { pool } : {},
  });

beforeAll(async () => {
  expect(LABEL.length).toBe(64);
  s = await startReadStack({ POOL_SECRET: SECRET });
  await s.api.app.listen({ host: "127.0.0.1", port: 0 });
  base = `http://127.0.0.1:${(s.api.app.server.address() as AddressInfo).port}`;
  k = await s.project();
  // Out of order: the newest (rag, 9,820 tokens left) first, the oldest (agent) last.
  await s.send(k.report, [
    openai("rag", 1_000, 9_820),
    openai("chat", 3_000, 9_822),
    openai("agent", 5_000, 9_823),
    // Two apps pooled by label, the newest 92 % used (critical), and an app alone.
    groq(LONG_APP, 4_000, 20, LABEL),
    groq("b", 2_000, 8, LABEL),
    groq("c", 3_000, 70),
  ]);
  await s.stored(k.project, 6);
}, 120_000);

afterEach(async () => {
  for (const page of pages.splice(0)) await page.context().close();
});

afterAll(async () => {
  await launched?.then((b) => b.close()).catch(() => {});
  await s?.close();
});

async function open(viewport: { width: number; height: number }, errors: string[]) {
  const context = await (await browser()).newContext({ viewport });
  const page = await context.newPage();
  pages.push(page);
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`${m.text()} ${m.location().url}`);
  });
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${base}/#key=${encodeURIComponent(k.read)}`);
  await page.locator("#dashboard").waitFor();
  return page;
}

const choose = (page: Page, group: string, text: string) =>
  page
    .locator(`#${group} label`)
    .filter({ hasText: new RegExp(`^${text}$`) })
    .click();

interface Part {
  kind: string | null;
  app: string | null;
  apps: string;
  pool: string | null;
  status: string;
  name: string;
  title: string;
  poolName: string | null;
  members: { app: string; key: string; text: string }[];
  requests: string | null;
  tokens: string | null;
  requestsStatus: string | null;
  tokensStatus: string | null;
  shared: string | null;
}

// The page's DOM is read inside the browser, in one synchronous call each (the page redraws the
// "Now" section every 2 s): the code below runs there, typed loosely (no DOM types here).

/** The cards as they are drawn now. */
const cards = (page: Page) =>
  page.locator("body").evaluate((body) =>
    [...body.querySelectorAll("#cards article.card")].map((card) => ({
      provider: card.dataset.provider ?? "",
      parts: [...card.querySelectorAll(".series")].map((p) => ({
        kind: p.dataset.kind ?? null,
        app: p.dataset.app ?? null,
        apps: p.dataset.apps ?? "",
        pool: p.dataset.pool ?? null,
        status: p.dataset.status ?? "",
        name: p.querySelector(".part-name .name")?.textContent ?? "",
        title: p.querySelector(".part-name .name")?.getAttribute("title") ?? "",
        poolName: p.querySelector(".pool-name")?.textContent ?? null,
        members: [...p.querySelectorAll(".members li")].map((li) => ({
          app: li.dataset.app ?? "",
          key: li.dataset.keyId ?? "",
          text: li.textContent ?? "",
        })),
        requests:
          p
            .querySelector('[data-metric="requests"] [data-field="remaining"]')
            ?.getAttribute("data-value") ?? null,
        tokens:
          p
            .querySelector('[data-metric="tokens"] [data-field="remaining"]')
            ?.getAttribute("data-value") ?? null,
        requestsStatus: p.querySelector('[data-metric="requests"]')?.dataset.status ?? null,
        tokensStatus: p.querySelector('[data-metric="tokens"]')?.dataset.status ?? null,
        shared: p.querySelector('[data-field="pool"]')?.textContent ?? null,
      })),
    })),
  ) as Promise<{ provider: string; parts: Part[] }[]>;

const partsOf = async (page: Page, provider: string) =>
  (await cards(page)).find((c) => c.provider === provider)?.parts ?? [];

/** The table's rows (not their details) as drawn now. */
const rows = (page: Page) =>
  page.locator("body").evaluate((body) =>
    [...body.querySelectorAll("#now-table tbody tr[data-key]")].map((tr) => ({
      provider: tr.dataset.provider ?? "",
      app: tr.dataset.app ?? "",
      pool: tr.dataset.pool ?? null,
      members: Number(tr.dataset.members),
      status: tr.dataset.status ?? "",
      apps: tr.querySelector('[data-field="app"] .cut')?.getAttribute("title") ?? "",
      height: tr.getBoundingClientRect().height,
    })),
  ) as Promise<
    {
      provider: string;
      app: string;
      pool: string | null;
      members: number;
      status: string;
      apps: string;
      height: number;
    }[]
  >;

/**
 * What a person would see as broken: the page wider than the window, the table wider than its
 * box, a piece of a card's part
 * (or of a detail row's) that sticks out of it, a name and its badge or a member's app, key and
 * time drawn over each other.
 */
const layoutProblems = (page: Page) =>
  page.locator("body").evaluate((body) => {
    const problems = [];
    const doc = body.ownerDocument;
    const width = doc.defaultView.innerWidth;
    if (doc.documentElement.scrollWidth > width)
      problems.push(
        `the page is ${doc.documentElement.scrollWidth} px wide in a ${width} px window`,
      );
    // The table of pools fits its box: a person sees every column without scrolling it.
    const box = body.querySelector("#now-table").parentElement;
    if (box.getClientRects().length > 0 && box.scrollWidth > box.clientWidth)
      problems.push(`the table is ${box.scrollWidth} px wide in its ${box.clientWidth} px box`);
    const shown = [...body.querySelectorAll(".series")].filter(
      (p) => p.getClientRects().length > 0,
    );
    for (const part of shown) {
      const box = part.getBoundingClientRect();
      for (const el of part.querySelectorAll(
        ".part-name, .part-name > *, .pool-name, .members, .members li, .members li > *, .metric, .bar, table.windows, .details",
      )) {
        const r = el.getBoundingClientRect();
        if (r.width === 0) continue;
        if (r.left < box.left - 1 || r.right > box.right + 1)
          problems.push(
            `${el.className} "${el.textContent.slice(0, 40)}" sticks out of its part (${r.left}–${r.right} in ${box.left}–${box.right})`,
          );
      }
      for (const group of part.querySelectorAll(".part-name, .members li")) {
        const kids = [...group.children];
        for (let i = 0; i < kids.length; i++)
          for (let j = i + 1; j < kids.length; j++) {
            const ra = kids[i].getBoundingClientRect();
            const rb = kids[j].getBoundingClientRect();
            const apart =
              ra.right <= rb.left + 0.5 ||
              rb.right <= ra.left + 0.5 ||
              ra.bottom <= rb.top + 0.5 ||
              rb.bottom <= ra.top + 0.5;
            if (!apart)
              problems.push(
                `${kids[i].className} "${kids[i].textContent.slice(0, 40)}" overlaps ${kids[j].className} "${kids[j].textContent.slice(0, 40)}"`,
              );
          }
      }
    }
    return problems;
  }) as Promise<string[]>;

/** A long name is cut to its box (wider than it) and said whole in its title. */
const cut = (page: Page, selector: string) =>
  page
    .locator(selector)
    .first()
    .evaluate((el) => ({
      title: el.getAttribute("title"),
      cut: el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight,
      right: el.getBoundingClientRect().right,
    }));

/** The whole page, and what the window shows from the top (the "Now" section). */
async function shots(page: Page, name: string) {
  await screenshot(page, name);
  await page.evaluate("window.scrollTo(0, 0)");
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-top.png`) });
}

describe("pools on the headroom page", () => {
  it("draws one part per pool: three apps through one OpenAI organisation are one, with three members and the newest figure (1400 × 1000)", async () => {
    const errors: string[] = [];
    const page = await open(DESKTOP, errors);
    await choose(page, "views", "Cards");
    await expect
      .poll(async () => (await partsOf(page, "openai")).length, { timeout: 15_000 })
      .toBe(1);

    const api = (await s.get("/api/v1/headroom?group=pool", k.read)).json() as {
      pools: {
        pool: string;
        provider: string;
        kind: string;
        tokens: { remaining: number };
        members: { app: string; key_id: string | null }[];
      }[];
    };
    const pool = api.pools.find((p) => p.provider === "openai");
    expect(pool?.tokens.remaining).toBe(9_820);
    const [part] = (await partsOf(page, "openai")) as [Part];
    expect(part).toMatchObject({ kind: "account", pool: pool?.pool, apps: "rag,chat,agent" });
    // The newest report's figure, not any one app's last.
    expect(part.tokens).toBe("9820");
    expect(part.name).toBe("gpt-4o");
    expect(part.poolName).toBe("3 apps · account pool");
    expect(part.members.map((m) => [m.app, m.key])).toEqual(
      pool?.members.map((m) => [m.app, m.key_id]),
    );
    for (const m of part.members) {
      expect(m.key).toMatch(/^key_/);
      expect(m.text).toMatch(new RegExp(`^${m.app}${m.key}seen \\d[\\d a-z]* ago$`));
    }
    // The organisation's id is nowhere on the page (only its keyed hash's short id).
    expect(await page.content()).not.toContain(ORG);

    // The label pool and the app alone: each figure coloured by itself (the pool is critical by
    // its requests; its tokens, 10 % used, are ok), the app alone like a series' part.
    const groqParts = await partsOf(page, "groq");
    expect(groqParts.map((p) => [p.kind, p.apps, p.status])).toEqual([
      ["label", `b,${LONG_APP}`, "critical"],
      ["app", "c", "ok"],
    ]);
    const [labelled, alone] = groqParts as [Part, Part];
    expect(labelled).toMatchObject({
      requests: "8",
      requestsStatus: "critical",
      tokensStatus: "ok",
    });
    expect(labelled.title).toBe(`groq · llama-3.3-70b-versatile · b, ${LONG_APP} · pool ${LABEL}`);
    expect(labelled.poolName).toBe(`2 apps · pool ${LABEL}`);
    expect(alone).toMatchObject({
      app: "c",
      name: "llama-3.3-70b-versatile · app c",
      members: [],
      poolName: null,
    });
    // Polled: the cards' width settles as the sections below them load (a scrollbar appears).
    await expect
      .poll(() => cut(page, `.members .member-app[title="${LONG_APP}"]`), { timeout: 15_000 })
      .toMatchObject({ title: LONG_APP, cut: true });
    await expect
      .poll(() => cut(page, '.series[data-kind="label"] .pool-name'), { timeout: 15_000 })
      .toMatchObject({ cut: true });
    expect(await layoutProblems(page)).toEqual([]);
    await shots(page, "pools-cards-1400x1000");

    // By app: the three series again, each its own app's figure, each saying whom it shares with.
    await choose(page, "grouping", "By app");
    await expect
      .poll(async () => (await partsOf(page, "openai")).length, { timeout: 15_000 })
      .toBe(3);
    const byApp = await partsOf(page, "openai");
    expect(Object.fromEntries(byApp.map((p) => [p.app, p.tokens]))).toEqual({
      agent: "9823",
      chat: "9822",
      rag: "9820",
    });
    expect(byApp.find((p) => p.app === "chat")?.shared).toBe(
      "shares its limit with rag, agent · account pool",
    );
    expect((await partsOf(page, "groq")).length).toBe(3);
    expect(await layoutProblems(page)).toEqual([]);
    await shots(page, "pools-cards-by-app-1400x1000");

    // The table: a row per series by app, a row per pool by pool, its members in its detail.
    await choose(page, "views", "Table");
    await expect
      .poll(async () => (await rows(page)).filter((r) => r.provider === "openai").length, {
        timeout: 15_000,
      })
      .toBe(3);
    expect(await page.locator("#now-count").textContent()).toBe("6 series, worst first");
    // The cards drawn before are hidden, not left under the table.
    expect(await page.locator("#cards").isVisible()).toBe(false);
    await choose(page, "grouping", "By pool");
    await expect
      .poll(async () => (await rows(page)).filter((r) => r.provider === "openai"), {
        timeout: 15_000,
      })
      .toEqual([
        expect.objectContaining({
          pool: pool?.pool,
          members: 3,
          apps: "rag, chat, agent · account pool",
        }),
      ]);
    expect(await page.locator("#now-count").textContent()).toBe("3 pools, worst first");
    // Worst first: the critical label pool leads.
    expect((await rows(page))[0]).toMatchObject({
      provider: "groq",
      members: 2,
      status: "critical",
    });
    // The app filter keeps the pools that app is a member of.
    await page.locator("#now-app").selectOption("chat");
    await expect.poll(async () => (await rows(page)).length, { timeout: 15_000 }).toBe(1);
    await page.locator("#now-app").selectOption("");
    await page.locator(`#now-table tr[data-pool="${pool?.pool}"] button.toggle`).click();
    const detail = page.locator("#now-table tr.detail .members li");
    await expect.poll(() => detail.count(), { timeout: 15_000 }).toBe(3);
    // Cut or not as the table's columns fall (an open detail row widens them): its title names
    // every member in full, and nothing sticks out of its cell (layoutProblems).
    const appCell = await cut(page, '#now-table tr[data-members="2"] [data-field="app"] .cut');
    expect(appCell).toMatchObject({ title: `b, ${LONG_APP} · pool ${LABEL}` });
    expect(await layoutProblems(page)).toEqual([]);
    await shots(page, "pools-table-1400x1000");
    expect(await seriousViolations(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it("fits a phone (390 × 844): pools as cards and as rows, nothing sideways, nothing overlapping", async () => {
    const errors: string[] = [];
    const page = await open(PHONE, errors);
    await expect
      .poll(async () => (await rows(page)).map((r) => r.members), { timeout: 15_000 })
      .toEqual([2, 1, 3]);
    // One row a pool: its name cut to two lines, its worst window under it.
    for (const r of await rows(page)) expect(r.height).toBeLessThan(90);
    const name = await cut(page, '#now-table tr[data-members="2"] th[data-field="series"] .cut');
    expect(name.title).toBe(`groq · llama-3.3-70b-versatile · b, ${LONG_APP} · pool ${LABEL}`);
    expect(name.cut).toBe(true);
    expect(name.right).toBeLessThanOrEqual(PHONE.width);
    await page.locator('#now-table tr[data-members="3"] button.toggle').click();
    await expect
      .poll(() => page.locator("#now-table tr.detail .members li").count(), { timeout: 15_000 })
      .toBe(3);
    expect(await layoutProblems(page)).toEqual([]);
    await shots(page, "pools-table-390x844");

    await choose(page, "views", "Cards");
    await expect
      .poll(async () => (await partsOf(page, "openai")).length, { timeout: 15_000 })
      .toBe(1);
    expect((await partsOf(page, "openai"))[0]?.members.map((m) => m.app)).toEqual([
      "rag",
      "chat",
      "agent",
    ]);
    const longName = await cut(page, `.members .member-app[title="${LONG_APP}"]`);
    expect(longName.cut).toBe(true);
    expect(longName.right).toBeLessThanOrEqual(PHONE.width);
    expect(await layoutProblems(page)).toEqual([]);
    await shots(page, "pools-cards-390x844");
    await choose(page, "grouping", "By app");
    await expect
      .poll(async () => (await partsOf(page, "openai")).length, { timeout: 15_000 })
      .toBe(3);
    expect(await layoutProblems(page)).toEqual([]);
    await shots(page, "pools-cards-by-app-390x844");
    expect(await seriousViolations(page)).toEqual([]);
    expect(errors).toEqual([]);
  });
});
