import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ENDPOINTS,
  type ProjectKeys,
  type ReadStack,
  startReadStack,
} from "../helpers/read-stack.js";

// Hostile parameters (SQL fragments, huge ranges, unknown fields, bad cursors, repeated
// parameters): a 400 `invalid_query`, never a 500, never another project's rows.

const MAX_POINTS = 10;
let s: ReadStack;
let a: ProjectKeys;
let b: ProjectKeys;
/** What only project b's rows contain. */
const VICTIM = { provider: "victim-provider", app: "victim-app", model: "victim-model" };
let victimIds: string[] = [];

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
const limits = {
  requests_limit: 10,
  requests_remaining: 5,
  tokens_limit: null,
  tokens_remaining: null,
  reset_requests_ms: 100,
  reset_tokens_ms: null,
};

beforeAll(async () => {
  // The read limit is not under test here (read-api.scopes.test.ts): room for every request.
  s = await startReadStack({
    READ_MAX_POINTS: String(MAX_POINTS),
    READ_RATE_PER_S: "100000",
    READ_BURST: "1000000",
  });
  [a, b] = [await s.project(), await s.project()];
  // Project a: one report a minute for 15 minutes, more points than READ_MAX_POINTS.
  const mine = Array.from({ length: 15 }, (_, i) => ({
    provider: "openai",
    app: "chat",
    model: "gpt",
    timestamp: ago((i + 1) * 60_000),
    limits,
  }));
  const theirs = Array.from({ length: 4 }, (_, i) => ({
    ...VICTIM,
    timestamp: ago((i + 1) * 90_000),
    limits,
    credits: { credits_limit: 10, credits_remaining: 7, request_cost: 1 },
  }));
  await s.send(a.report, mine);
  victimIds = await s.send(b.report, theirs);
  await Promise.all([s.stored(a.project, 15), s.stored(b.project, 4)]);
});

afterAll(async () => {
  await s?.close();
});

/**
 * Nothing of project b in an answer to project a, but for what a's own request said (a 400 may
 * name the value it refuses).
 */
function expectNoVictim(body: string, sent: string[] = []) {
  for (const marker of [...Object.values(VICTIM), b.project, ...victimIds]) {
    if (sent.some((v) => v.includes(marker))) continue;
    expect(body).not.toContain(marker);
  }
}

async function expectInvalid(url: string, names?: string) {
  const res = await s.get(url, a.read);
  expect(res.statusCode, `${url}: ${res.body}`).toBe(400);
  expect(res.json()).toMatchObject({ error: "invalid_query" });
  if (names) expect(res.json().message).toContain(names);
  return res.json();
}

describe("parameters that are refused, each named", () => {
  it.each(ENDPOINTS)("an unknown parameter on %s", async (url) => {
    const body = await expectInvalid(`${url}?project_id=${b.project}&x=1`, "project_id");
    expect(body.issues.map((i: { path: string }) => i.path).sort()).toEqual(["project_id", "x"]);
  });

  it.each([
    ["group_by=project_id", "project_id"],
    ["group_by=provider,provider", "group_by"],
    ["group_by=provider;DROP", "provider;DROP"],
    ["window=week", "window"],
    ["window=minute&window=hour", "window"],
    ["from=yesterday", "from"],
    ["from=2025-01-01", "from"],
    ["from=1900-01-01T00:00:00Z", "from"],
    ["from=2025-01-02T00:00:00Z&to=2025-01-01T00:00:00Z", "from"],
    ["from=2025-01-01T00:00:00Z&from=2025-01-02T00:00:00Z", "from"],
    ["window=minute&from=2025-01-01T00:00:00Z&to=2025-03-01T00:00:00Z", "window=hour"],
    ["window=hour&from=2020-01-01T00:00:00Z&to=2025-03-01T00:00:00Z", "window=day"],
    ["window=day&from=2000-01-01T00:00:00Z&to=2099-01-01T00:00:00Z", "from/to"],
    ["format=xml", "format"],
    ["provider=", "provider"],
    [`model=${"m".repeat(300)}`, "model"],
    [Array.from({ length: 60 }, (_, i) => `app=a${i}`).join("&"), "app"],
  ])("usage: %s", async (query, named) => {
    await expectInvalid(`/api/v1/usage?${query}`, named);
  });

  it("usage: more points than READ_MAX_POINTS is a 400 that says how to narrow it", async () => {
    const body = await expectInvalid(
      `/api/v1/usage?from=${encodeURIComponent(ago(3_600_000))}&window=minute`,
    );
    expect(body.message).toMatch(new RegExp(`more than ${MAX_POINTS} points: narrow`));
    // The same range in hour windows is a few points, and is answered.
    const ok = await s.get(
      `/api/v1/usage?from=${encodeURIComponent(ago(3_600_000))}&window=hour`,
      a.read,
    );
    expect(ok.statusCode).toBe(200);
  });

  const cursor = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  it.each([
    ["not base64", "!!!"],
    ["not JSON", Buffer.from("{{").toString("base64url")],
    ["an object", cursor({ t: 1, id: "x" })],
    ["a negative time", cursor([-1, "01a20e9d-2268-7770-bf26-0c8d49932126"])],
    ["a fractional time", cursor([1.5, "01a20e9d-2268-7770-bf26-0c8d49932126"])],
    ["SQL in the id", cursor([1, "x' OR 1=1 --"])],
    ["too long", "A".repeat(500)],
  ])("reports: a cursor that is %s", async (_name, c) => {
    await expectInvalid(`/api/v1/reports?cursor=${encodeURIComponent(c)}`, "cursor");
    await expectInvalid(`/api/v1/alerts/events?cursor=${encodeURIComponent(c)}`, "cursor");
  });

  it.each([
    ["year 2100", Date.UTC(2100, 0, 1)],
    ["a six-digit year", 8_000_000_000_000_000],
    ["past any date", Number.MAX_SAFE_INTEGER],
  ])("a cursor whose time is %s", async (_name, t) => {
    const report = cursor([t, "01a20e9d-2268-7770-bf26-0c8d49932126"]);
    const event = cursor([t, "evt_00000000000000000000000000000000"]);
    await expectInvalid(`/api/v1/reports?cursor=${report}`, "cursor");
    await expectInvalid(`/api/v1/alerts/events?cursor=${event}`, "cursor");
  });

  it("a cursor of the other list", async () => {
    const event = cursor([1, "evt_00000000000000000000000000000000"]);
    const report = cursor([1, "01a20e9d-2268-7770-bf26-0c8d49932126"]);
    await expectInvalid(`/api/v1/reports?cursor=${event}`, "cursor");
    await expectInvalid(`/api/v1/alerts/events?cursor=${report}`, "cursor");
  });

  it.each([
    "limit=0",
    "limit=101",
    "limit=-1",
    "limit=1e2",
    "limit=10&limit=20",
    "cursor=a&cursor=b",
    "level=fatal",
  ])("lists: %s", async (query) => {
    const url = query.startsWith("level") ? "/api/v1/alerts/events" : "/api/v1/reports";
    await expectInvalid(`${url}?${query}`);
  });
});

describe("SQL fragments in filters are values, never SQL", () => {
  it.each([
    "' OR '1'='1",
    "openai' OR project_id != '",
    "x') OR 1=1 --",
    "{project:String}",
    "\\' OR 1=1 #",
    "victim-provider' AND project_id = 'x",
  ])("%s", async (fragment) => {
    const v = encodeURIComponent(fragment);
    for (const url of ENDPOINTS) {
      for (const field of url.includes("alerts") ? ["provider"] : ["provider", "model", "app"]) {
        const res = await s.get(`${url}?${field}=${v}`, a.read);
        expect(res.statusCode, `${url} ${field}: ${res.body}`).toBe(200);
        expectNoVictim(res.body);
        const body = res.json();
        const list = body.series ?? body.points ?? body.items ?? body.providers;
        expect(list, url).toEqual([]);
      }
    }
  });

  it("a filter naming the other project's series finds nothing", async () => {
    for (const url of ENDPOINTS) {
      const res = await s.get(`${url}?provider=${VICTIM.provider}`, a.read);
      expect(res.statusCode).toBe(200);
      expectNoVictim(res.body);
    }
  });
});

describe("any query string", () => {
  const keys = fc.constantFrom(
    "from",
    "to",
    "window",
    "group_by",
    "format",
    "provider",
    "model",
    "app",
    "limit",
    "cursor",
    "level",
    "project_id",
    "__proto__",
    "constructor",
    "x",
    "",
  );
  const values = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ unit: "grapheme", maxLength: 20 }),
    fc.constantFrom(
      "minute",
      "hour",
      "day",
      "provider",
      "provider,model",
      "model,app,provider",
      "csv",
      "json",
      "openai",
      "chat",
      "gpt",
      VICTIM.provider,
      VICTIM.app,
      "warning",
      "10",
      "100",
      "' OR 1=1 --",
      "%00",
      "%zz",
      "1970-01-01T00:00:00Z",
      "2000-01-01T00:00:00Z",
      "2099-12-31T23:59:59Z",
      ago(3_600_000),
      ago(86_400_000 * 8),
      new Date().toISOString(),
      Buffer.from(JSON.stringify([Date.now(), "x"])).toString("base64url"),
    ),
  );
  const query = fc.array(fc.tuple(keys, values), { maxLength: 6 });

  it("is answered 200 or 400 invalid_query, never 500, never with another project's rows", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ENDPOINTS), query, async (url, pairs) => {
        const qs = pairs
          .map(
            ([k, v]) => `${encodeURIComponent(k)}=${v.startsWith("%") ? v : encodeURIComponent(v)}`,
          )
          .join("&");
        const res = await s.get(`${url}?${qs}`, a.read);
        expect([200, 400], `${url}?${qs}: ${res.body}`).toContain(res.statusCode);
        if (res.statusCode === 400) expect(res.json().error).toBe("invalid_query");
        expectNoVictim(
          res.body,
          pairs.map(([, v]) => v),
        );
      }),
      { numRuns: 150 },
    );
  });
});
