import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { CLIENT_LIMITS } from "../../fixtures/sample-reports.js";
import { buildOpenApi } from "../../src/edge/openapi.js";

// The OpenAPI document is generated from the zod schemas; checked here against the contract's
// examples, so that client authors in any language get a description that matches the edge.

const doc = buildOpenApi();
const post = doc.paths["/api/report"].post;
const ajv = new Ajv2020({ strict: false, allErrors: true });
const requestSchema = post.requestBody.content["application/json"].schema;
const validRequest = ajv.compile(requestSchema);
const errorSchema = post.responses["400"].content["application/json"].schema;
const validError = ajv.compile(errorSchema);
const validOk = ajv.compile(post.responses["200"].content["application/json"].schema);

const limits = CLIENT_LIMITS;
const nullLimits = Object.fromEntries(Object.keys(limits).map((k) => [k, null]));

describe("OpenAPI 3.1 document", () => {
  it("describes POST /api/report with bearer auth and every contract status", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.components.securitySchemes.projectKey).toEqual({ type: "http", scheme: "bearer" });
    expect(Object.keys(post.responses).sort()).toEqual(
      ["200", "400", "401", "403", "405", "413", "415", "429", "503"].sort(),
    );
  });

  it("accepts the real client's payloads", () => {
    const examples = [
      {
        app: "my-app",
        provider: "openai",
        model: "gpt-4o-mini",
        timestamp: "2026-11-20T10:00:00.000Z",
        limits,
        credits: null,
      },
      {
        app: "my-app",
        provider: "openrouter",
        model: "x",
        timestamp: "2026-11-20T10:00:00.000Z",
        limits,
        credits: { credits_limit: 10, credits_remaining: 9.5, request_cost: 0.0001 },
      },
      {
        app: "my-app",
        provider: "anthropic",
        model: null,
        timestamp: "2026-11-20T10:00:00.000Z",
        limits: nullLimits,
      },
      { provider: "groq", limits: nullLimits },
    ];
    for (const body of examples)
      expect(validRequest(body), JSON.stringify(validRequest.errors)).toBe(true);
  });

  it("refuses what the edge refuses: no provider, no limits, numbers as strings", () => {
    expect(validRequest({ limits })).toBe(false);
    expect(validRequest({ provider: "openai" })).toBe(false);
    expect(validRequest({ provider: "openai", limits: { ...limits, requests_limit: "10" } })).toBe(
      false,
    );
    expect(validRequest({ provider: "openai", limits, credits: [] })).toBe(false);
  });

  it("describes the contract's bodies", () => {
    expect(validOk({ id: "01a1fcd1-136c-70a1-9dcf-b0769048c09b" })).toBe(true);
    expect(
      validError({
        error: "invalid_report",
        message: "limits.requests_limit: expected a number or null",
        issues: [{ path: "limits.requests_limit", message: "expected a number or null" }],
      }),
    ).toBe(true);
    expect(
      validError({
        error: "quota_exceeded",
        message: "m",
        limit: 3000,
        remaining: 0,
        reset_at: "2026-12-01T00:00:00.000Z",
        used: 3000,
      }),
    ).toBe(true);
    expect(validError({ error: "no_such_code", message: "m" })).toBe(false);
  });
});

describe("POST /api/reports in the OpenAPI document", () => {
  const batch = doc.paths["/api/reports"].post;
  const validBatch = ajv.compile(batch.requestBody.content["application/json"].schema);
  const validResults = ajv.compile(batch.responses["207"].content["application/json"].schema);

  it("lists every status of the batch endpoint", () => {
    expect(Object.keys(batch.responses).sort()).toEqual(
      ["200", "207", "400", "401", "405", "413", "415", "429", "503"].sort(),
    );
    expect(Object.keys(batch.requestBody.content).sort()).toEqual([
      "application/json",
      "application/x-ndjson",
    ]);
  });

  it("takes an array of reports with optional UUID ids, and refuses another id", () => {
    const report = { provider: "groq", limits: nullLimits };
    const id = "5b0e8a1c-2d3f-4e5a-9b6c-7d8e9f0a1b2c";
    expect(validBatch([report, { ...report, id }, { ...report, id: null }])).toBe(true);
    expect(validBatch([{ ...report, id: "not-a-uuid" }])).toBe(false);
    // Any UUID as text, as the edge takes it: version and variant bits unchecked, either case.
    const anyHex = "12345678-1234-1234-1234-123456789ABC";
    expect(validBatch([{ ...report, id: anyHex }]), JSON.stringify(validBatch.errors)).toBe(true);
    expect(validResults({ results: [{ id: anyHex.toLowerCase(), duplicate: true }] })).toBe(true);
    expect(validBatch(report)).toBe(false);
  });

  it("describes the results the edge gives", () => {
    const results = {
      results: [
        { id: "0192f0c4-8a1b-7c2d-9e3f-4a5b6c7d8e9f" },
        { id: "0192f0c4-8a1b-7c2d-9e3f-4a5b6c7d8e9f", duplicate: true },
        {
          id: "0192f0c4-8a1b-7c2d-9e3f-4a5b6c7d8e9f",
          warnings: [{ path: "model", message: "must not be empty: stored as null" }],
        },
        { error: "invalid_report", message: "provider: required", issues: [] },
        { error: "quota_exceeded", message: "m", limit: 5, remaining: 0, reset_at: "x", used: 5 },
      ],
    };
    expect(validResults(results), JSON.stringify(validResults.errors)).toBe(true);
    expect(validResults({ results: [{ error: "no_such_code", message: "m" }] })).toBe(false);
  });
});
