import { describe, expect, it } from "vitest";
import { AT, derive, windowOf } from "../fixtures/providers/source.js";

// The generic parser: x-ratelimit-* with any suffix, and the IETF RateLimit fields
// (https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/), whose examples
// these follow in each of the drafts' shapes.

describe("generic parser", () => {
  it("reads any x-ratelimit-*-<what>, the window from a period word", () => {
    const d = derive("some-new-provider", {
      "x-ratelimit-limit-requests-hour": "1000",
      "x-ratelimit-remaining-requests-hour": "999",
      "x-ratelimit-reset-requests-hour": "2026-01-01T00:30:00Z",
      "x-ratelimit-limit-images": "50",
    });
    expect(d.parser).toBe("generic@1");
    expect(d.windows).toEqual([
      {
        dimension: "requests",
        window: "1h",
        limit: 1000,
        remaining: 999,
        resets_at: AT + 1_800_000,
      },
      { dimension: "images", window: null, limit: 50, remaining: null, resets_at: null },
    ]);
  });

  it("reads the bare x-ratelimit-* as requests, the reset in epoch seconds", () => {
    const d = derive("acme", {
      "X-RateLimit-Limit": "60",
      "X-RateLimit-Remaining": "56",
      "X-RateLimit-Reset": "1767225900",
    });
    expect(d.windows).toEqual([
      {
        dimension: "requests",
        window: null,
        limit: 60,
        remaining: 56,
        resets_at: 1_767_225_900_000,
      },
    ]);
  });

  it("reads the early drafts' RateLimit-Limit / -Remaining / -Reset with a window", () => {
    const d = derive("acme", {
      "RateLimit-Limit": "100, 100;w=60",
      "RateLimit-Remaining": "50",
      "RateLimit-Reset": "30",
    });
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1m", limit: 100, remaining: 50, resets_at: AT + 30_000 },
    ]);
  });

  it("reads draft 7's RateLimit dictionary and each policy it names", () => {
    const d = derive("acme", {
      "RateLimit-Policy": "10;w=1, 50;w=60",
      RateLimit: "limit=10, remaining=9, reset=1",
    });
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1s", limit: 10, remaining: 9, resets_at: AT + 1000 },
      { dimension: "requests", window: "1m", limit: 50, remaining: null, resets_at: null },
    ]);
  });

  it("reads the structured-field drafts' named policies and their units", () => {
    const d = derive("acme", {
      "RateLimit-Policy":
        '"hour";q=1000;w=3600, "day";q=5000;w=86400;qu="requests", "tok";q=90000;w=60;qu="tokens"',
      RateLimit: '"hour";r=400;t=1800, "tok";r=100;t=5',
    });
    expect(d.windows).toEqual([
      {
        dimension: "requests",
        window: "1h",
        limit: 1000,
        remaining: 400,
        resets_at: AT + 1_800_000,
      },
      { dimension: "tokens", window: "1m", limit: 90_000, remaining: 100, resets_at: AT + 5000 },
      { dimension: "requests", window: "1d", limit: 5000, remaining: null, resets_at: null },
    ]);
    expect(d.warnings).toEqual([]);
  });

  it("warns about junk in the IETF fields", () => {
    const d = derive("acme", { RateLimit: "limit=ten, remaining=-1, reset=soon" });
    expect(windowOf(d, "requests")).toBeUndefined();
    expect(d.warnings.map((w) => w.path)).toEqual([
      "headers.ratelimit",
      "headers.ratelimit",
      "headers.ratelimit",
    ]);
  });
});
