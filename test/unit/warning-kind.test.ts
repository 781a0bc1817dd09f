import { describe, expect, it } from "vitest";
import { warningKind } from "../../src/report/warning-kind.js";

describe("warningKind", () => {
  it.each([
    ["headers.x-ratelimit-limit-0a1b2c", "headers"],
    ["limits.requests_limit", "limits"],
    ["error[0].error.details[2].retryDelay", "error"],
    ["error.details[0].quotaId", "error"],
    ["timestamp", "timestamp"],
    ["model", "model"],
    ["windows", "windows"],
    ["tokens_usage_based", "other"],
    ["__proto__", "other"],
    ["", "other"],
  ])("%s is of kind %s", (path, kind) => {
    expect(warningKind(path)).toBe(kind);
  });
});
