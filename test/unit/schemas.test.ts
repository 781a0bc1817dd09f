import { describe, expect, it } from "vitest";
import {
  auditQuery,
  createKeyBody,
  createProjectBody,
  rotateKeyBody,
  ruleBody,
  setPlanBody,
} from "../../src/control/schemas.js";

// The control plane's bodies: each bound a tenant's value meets where it enters, pinned with its
// documented literal (docs/control-plane.md), never with the constant under test.

const ok = (schema: { safeParse: (v: unknown) => { success: boolean } }, v: unknown) =>
  schema.safeParse(v).success;

describe("rotateKeyBody", () => {
  it("takes an overlap from 0 to 30 days (2592000 s), a day when none is given", () => {
    expect(rotateKeyBody.parse({})).toEqual({ expires_in_s: 86_400 });
    expect(ok(rotateKeyBody, { expires_in_s: 0 })).toBe(true);
    expect(ok(rotateKeyBody, { expires_in_s: 2_592_000 })).toBe(true);
    expect(ok(rotateKeyBody, { expires_in_s: 2_592_001 })).toBe(false);
    expect(ok(rotateKeyBody, { expires_in_s: 1e300 })).toBe(false);
    expect(ok(rotateKeyBody, { expires_in_s: -1 })).toBe(false);
    expect(ok(rotateKeyBody, { expires_in_s: 1.5 })).toBe(false);
    expect(ok(rotateKeyBody, { expires_in_s: "60" })).toBe(false);
    expect(ok(rotateKeyBody, { expires_in_s: 60, extra: 1 })).toBe(false);
  });

  it("says the bound in its refusal", () => {
    const r = rotateKeyBody.safeParse({ expires_in_s: 2_592_001 });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toContain("2592000");
  });
});

describe("createKeyBody", () => {
  it("makes report, read and manage keys, never admin ones, report when not said", () => {
    expect(createKeyBody.parse({})).toEqual({ scope: "report" });
    for (const scope of ["report", "read", "manage"]) {
      expect(ok(createKeyBody, { scope })).toBe(true);
    }
    expect(ok(createKeyBody, { scope: "admin" })).toBe(false);
    expect(ok(createKeyBody, { scope: "report", project: "other" })).toBe(false);
  });
});

describe("createProjectBody and setPlanBody", () => {
  it("a project id is 1-64 of letters, digits, . _ -", () => {
    expect(ok(createProjectBody, { project: "a".repeat(64) })).toBe(true);
    expect(ok(createProjectBody, { project: "a".repeat(65) })).toBe(false);
    expect(ok(createProjectBody, { project: "" })).toBe(false);
    for (const bad of ["a b", "a/b", "*", "a:b", "{a}"]) {
      expect(ok(createProjectBody, { project: bad }), bad).toBe(false);
    }
  });

  it("overrides are positive whole numbers (monthly may be null), nothing else", () => {
    expect(ok(setPlanBody, { plan: "pro", overrides: { monthly: null, burst: 5 } })).toBe(true);
    expect(ok(setPlanBody, { plan: "pro", overrides: { burst: 0 } })).toBe(false);
    expect(ok(setPlanBody, { plan: "pro", overrides: { capacity: 1.5 } })).toBe(false);
    expect(ok(setPlanBody, { plan: "pro", overrides: { caps: { keys: 1_000 } } })).toBe(false);
    expect(ok(setPlanBody, { plan: "x".repeat(65) })).toBe(false);
  });
});

describe("ruleBody", () => {
  const rule = { metric: "requests", warn_pct: 70, critical_pct: 90, webhook: "https://h/x" };

  it("bounds a filter at 256 characters and a webhook at 2048", () => {
    expect(ok(ruleBody, rule)).toBe(true);
    expect(ok(ruleBody, { ...rule, app: "a".repeat(256) })).toBe(true);
    expect(ok(ruleBody, { ...rule, app: "a".repeat(257) })).toBe(false);
    expect(ok(ruleBody, { ...rule, model: "" })).toBe(false);
    expect(ok(ruleBody, { ...rule, webhook: `https://h/${"x".repeat(2_038)}` })).toBe(true);
    expect(ok(ruleBody, { ...rule, webhook: `https://h/${"x".repeat(2_039)}` })).toBe(false);
    expect(ok(ruleBody, { ...rule, project: "other" })).toBe(false);
  });
});

describe("auditQuery", () => {
  it("pages of 1 to 500 entries, 100 when not said; a cursor of its own alphabet", () => {
    expect(auditQuery.parse({})).toEqual({ limit: 100 });
    expect(auditQuery.parse({ limit: "500" }).limit).toBe(500);
    expect(ok(auditQuery, { limit: "501" })).toBe(false);
    expect(ok(auditQuery, { limit: "0" })).toBe(false);
    expect(ok(auditQuery, { cursor: "abc_-1" })).toBe(true);
    expect(ok(auditQuery, { cursor: "a".repeat(201) })).toBe(false);
    expect(ok(auditQuery, { cursor: "a b" })).toBe(false);
    expect(ok(auditQuery, { other: "1" })).toBe(false);
  });
});
