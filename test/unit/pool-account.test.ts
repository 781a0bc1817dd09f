import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { validateReport, validateReportBySchema } from "../../src/edge/parse-report.js";
import { accountHash, accountHeaderValues } from "../../src/report/pool-account.js";
import { fromRow, toRow } from "../../src/report/report-schema.js";

// The pool a report names (docs/pools.md): the account its provider named, kept only as a keyed
// hash scoped to the project, and the client's `pool` label.

const SECRET = "a-test-pool-secret-of-at-least-32-characters";
const ORG = "org-Zq8HvT3kLmNp0aBcDeFgHiJk";
const PROJECT_ID = "proj_Xy12AbCdEfGhIjKl";
const server = (projectId = "p") => ({
  reportId: "0190a000-0000-7000-8000-000000000001",
  projectId,
  keyId: "k",
  receivedAt: Date.now(),
});
const limits = { tokens_limit: 10_000, tokens_remaining: 9_000 };
const openai = (headers: unknown, extra: Record<string, unknown> = {}) => ({
  provider: "openai",
  model: "gpt-4o",
  limits,
  headers,
  ...extra,
});

describe("accountHeaderValues", () => {
  it("reads OpenAI's organisation and project and Anthropic's organisation, any case, either form", () => {
    expect(
      accountHeaderValues({ "OpenAI-Organization": ORG, "openai-project": PROJECT_ID, x: "y" }),
    ).toEqual([`openai-organization=${ORG}`, `openai-project=${PROJECT_ID}`]);
    expect(accountHeaderValues([["Anthropic-Organization-Id", "abc"]])).toEqual([
      "anthropic-organization-id=abc",
    ]);
    expect(accountHeaderValues({ "x-request-id": "r" })).toBeNull();
    expect(accountHeaderValues("openai-organization")).toBeNull();
    expect(accountHeaderValues({ "openai-organization": "x".repeat(257) })).toBeNull();
  });
});

describe("accountHash", () => {
  it("is 32 hex digits, the same for the same account and different per project and provider", () => {
    const h = accountHash(SECRET, "p", "openai", [`openai-organization=${ORG}`]);
    expect(h).toMatch(/^[0-9a-f]{32}$/);
    expect(accountHash(SECRET, "p", "openai", [`openai-organization=${ORG}`])).toBe(h);
    expect(accountHash(SECRET, "q", "openai", [`openai-organization=${ORG}`])).not.toBe(h);
    expect(accountHash(SECRET, "p", "azure", [`openai-organization=${ORG}`])).not.toBe(h);
    expect(accountHash(`${SECRET}!`, "p", "openai", [`openai-organization=${ORG}`])).not.toBe(h);
  });
});

describe("a report's pool", () => {
  it("keeps the organisation only as the keyed hash: nowhere in the record or its row", () => {
    const { record, warnings } = validateReport(
      openai({ "openai-organization": ORG, "openai-project": PROJECT_ID }),
      server(),
      { retentionDays: 30, poolSecret: SECRET },
    );
    expect(warnings).toEqual([]);
    expect(record.account).toBe(
      accountHash(SECRET, "p", "openai", [
        `openai-organization=${ORG}`,
        `openai-project=${PROJECT_ID}`,
      ]),
    );
    const text = JSON.stringify([record, toRow(record)]);
    expect(text).not.toContain(ORG);
    expect(text).not.toContain(PROJECT_ID);
    expect(fromRow(toRow(record))).toEqual(record);
  });

  it("three apps through one organisation name one account; another project another", () => {
    const of = (app: string, projectId = "p") =>
      validateReport(openai({ "openai-organization": ORG }, { app }), server(projectId), {
        retentionDays: 30,
        poolSecret: SECRET,
      }).record.account;
    expect(new Set([of("chat"), of("agent"), of("rag")]).size).toBe(1);
    expect(of("chat", "other")).not.toBe(of("chat"));
  });

  it("drops the account without a POOL_SECRET", () => {
    const { record } = validateReport(openai({ "openai-organization": ORG }), server(), {
      retentionDays: 30,
    });
    expect(record.account).toBeUndefined();
    expect(JSON.stringify(toRow(record))).not.toContain(ORG);
  });

  it("keeps a pool label, and stores any other value as null with a warning", () => {
    const ok = validateReport(openai(null, { pool: "openai-prod.eu_1" }), server(), {
      retentionDays: 30,
    });
    expect(ok.record.pool).toBe("openai-prod.eu_1");
    expect(ok.warnings).toEqual([]);
    for (const pool of ["a b", "x".repeat(65), "", 7, { a: 1 }, "é"]) {
      const { record, warnings } = validateReport(openai(null, { pool }), server(), {
        retentionDays: 30,
      });
      expect(record.pool ?? null, JSON.stringify(pool)).toBeNull();
      expect(warnings.map((w) => w.path)).toEqual(["pool"]);
    }
    // 64 characters is the longest label.
    expect(
      validateReport(openai(null, { pool: "x".repeat(64) }), server(), { retentionDays: 30 }).record
        .pool,
    ).toBe("x".repeat(64));
  });

  it("is the same record by the fast path and the schema", () => {
    fc.assert(
      fc.property(
        fc.option(fc.oneof(fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/), fc.string()), {
          nil: undefined,
        }),
        (pool) => {
          const body = { provider: "openai", limits, ...(pool === undefined ? {} : { pool }) };
          const opts = { retentionDays: 30 };
          const at = server();
          expect(validateReport(body, at, opts)).toEqual(validateReportBySchema(body, at, opts));
        },
      ),
    );
  });
});
