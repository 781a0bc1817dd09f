import { describe, expect, it } from "vitest";
import { repeatsAuthorization } from "../../src/http/authenticate.js";
import { redactPath, redactUrl } from "../../src/http/request-log.js";
import { generateKey } from "../../src/keys/key-format.js";

// What the edge may write about a URL, and how it tells a second Authorization header.

describe("redactUrl / redactPath", () => {
  const key = generateKey();
  const readKey = generateKey("read");
  it.each([
    [`/api/v1/usage?key=${readKey}`, "/api/v1/usage?[redacted]", "/api/v1/usage"],
    [`/x/${readKey.slice(0, 9)}`, "/x/[redacted]", "/x/[redacted]"],
    ["/api/report", "/api/report", "/api/report"],
    ["/healthz?verbose=1", "/healthz?[redacted]", "/healthz"],
    [`/api/report?key=${key}`, "/api/report?[redacted]", "/api/report"],
    [`/api/report/${key}`, "/api/report/[redacted]", "/api/report/[redacted]"],
    [`/x/${key.slice(0, 10)}`, "/x/[redacted]", "/x/[redacted]"],
    ["/v1/dlm_abc/def+ghi=/report", "/v1/[redacted]", "/v1/[redacted]"],
    ["/keys/AbCdEfGhIjKlMnOpQr", "/keys/[redacted]", "/keys/[redacted]"],
    ["/a:AbCdEfGhIjKlMnOpQr", "/a:[redacted]", "/a:[redacted]"],
    ["/api/report#frag", "/api/report?[redacted]", "/api/report"],
  ])("%s → %s", (url, logged, path) => {
    expect(redactUrl(url)).toBe(logged);
    expect(redactPath(url)).toBe(path);
  });
});

describe("repeatsAuthorization", () => {
  it.each([
    [["Host", "x", "Authorization", "Bearer a"], false],
    [["Authorization", "Bearer a", "authorization", "Bearer a"], true],
    [["AUTHORIZATION", "", "Authorization", "Bearer a"], true],
    [["Authorization", "Bearer a", "Authorizatio", "x", "X-Authorization", "y"], false],
    [[], false],
  ])("%j → %s", (raw, expected) => {
    expect(repeatsAuthorization(raw)).toBe(expected);
  });
});
