import { describe, expect, it } from "vitest";
import { createBytesInFlight, declaredBytes } from "../../src/edge/bytes-in-flight.js";

// The bound on request bodies an edge holds at once: what is let in, and what a body counts as.

describe("createBytesInFlight", () => {
  it("lets requests in up to the bound, refuses the one that would pass it, and frees on give", () => {
    const held = createBytesInFlight(100);
    expect(held.take(60)).toBe(true);
    expect(held.take(40)).toBe(true);
    expect(held.take(1)).toBe(false);
    expect(held.bytes).toBe(100);
    held.give(60);
    expect(held.take(50)).toBe(true);
    expect(held.bytes).toBe(90);
  });

  it("always lets the first request in, whatever its size", () => {
    const held = createBytesInFlight(100);
    expect(held.take(1_000)).toBe(true);
    expect(held.take(1)).toBe(false);
    held.give(1_000);
    expect(held.bytes).toBe(0);
    expect(held.take(1_000)).toBe(true);
  });
});

describe("declaredBytes", () => {
  it("is the Content-Length, the largest body for chunks, and nothing without a body", () => {
    expect(declaredBytes({ "content-length": "512" }, 1_000)).toBe(512);
    expect(declaredBytes({ "transfer-encoding": "chunked" }, 1_000)).toBe(1_000);
    expect(declaredBytes({}, 1_000)).toBe(0);
  });
});
