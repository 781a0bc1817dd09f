import { describe, expect, it } from "vitest";
import { DEFAULT_PLANS } from "../../src/config.js";
import { createLimits } from "../../src/edge/limits.js";
import { clientOf } from "../../src/limits/failed-auth-limiter.js";
import type { RedisClient } from "../../src/redis/connections.js";

// The per-client count of failed authentications: IPv6 clients are counted per /64, and the
// number of clients held is bounded whatever addresses arrive.

const noRedis = new Proxy({} as RedisClient, {
  get() {
    throw new Error("failed authentications are counted without Redis");
  },
});

const limits = (perIp: number, maxClients: number) =>
  createLimits({
    redis: noRedis,
    plans: DEFAULT_PLANS,
    authFailuresPerIp: perIp,
    authFailureWindowS: 60,
    authFailureMaxClients: maxClients,
  });

describe("clientOf", () => {
  it("keeps IPv4 addresses and groups IPv6 ones by /64", () => {
    expect(clientOf("203.0.113.9")).toBe("203.0.113.9");
    expect(clientOf("::ffff:203.0.113.9")).toBe("203.0.113.9");
    expect(clientOf("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(clientOf("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(clientOf("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(clientOf("::1")).toBe("0:0:0:0::/64");
    expect(clientOf("2001:db8:1:3::1")).not.toBe(clientOf("2001:db8:1:2::1"));
  });
});

describe("failed authentications per client", () => {
  it("refuses a /64 whose addresses each failed once", async () => {
    const l = limits(3, 1_000);
    for (let i = 1; i <= 3; i++) l.recordAuthFailure(`2001:db8:5:6:${i.toString(16)}::${i}`);
    expect(() => l.checkAuthFailures("2001:db8:5:6:ffff::9")).toThrow(
      expect.objectContaining({ code: "rate_limited" }),
    );
    expect(() => l.checkAuthFailures("2001:db8:5:7::1")).not.toThrow();
  });

  it("holds at most the configured number of clients, dropping the oldest", async () => {
    const l = limits(2, 100);
    for (let i = 0; i < 5_000; i++) l.recordAuthFailure(`198.51.${i >> 8}.${i & 255}`);
    expect(l.authFailureClients()).toBe(100);
    // The newest clients are still counted.
    l.recordAuthFailure("198.51.19.135");
    expect(() => l.checkAuthFailures("198.51.19.135")).toThrow(
      expect.objectContaining({ code: "rate_limited" }),
    );
  });
});
