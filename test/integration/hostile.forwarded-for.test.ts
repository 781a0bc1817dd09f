import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/keys/key-format.js";
import { clientReport, type EdgeFixture, startEdge } from "../helpers/edge-fixture.js";

// Behind a load balancer that appends the address it saw to X-Forwarded-For, a client writes
// whatever it likes to the left of it. The edge must count failed keys against the address the
// balancer saw, however the forged part varies.

const FAILURES = 5;
const BALANCER = "10.9.8.7";

let fx: EdgeFixture;

beforeAll(async () => {
  fx = await startEdge({
    env: {
      BACKLOG_CHECK_INTERVAL_MS: "3600000",
      AUTH_FAILURES_PER_IP: String(FAILURES),
      TRUST_PROXY: "1",
    },
  });
});

afterAll(async () => {
  await fx?.close();
});

async function guessFrom(forwardedFor: (i: number) => string, n: number) {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fx.post(clientReport(), {
      key: generateKey(),
      remoteAddress: BALANCER,
      headers: { "x-forwarded-for": forwardedFor(i) },
    });
    statuses.push(res.statusCode);
  }
  return statuses;
}

describe("TRUST_PROXY as a hop count", () => {
  it("counts failures against the address the balancer appended, not the forged ones", async () => {
    const statuses = await guessFrom((i) => `198.18.${i >> 8}.${i & 255}, 203.0.113.50`, 40);
    expect(statuses.slice(0, FAILURES)).toEqual(Array(FAILURES).fill(401));
    expect(statuses.slice(FAILURES)).toEqual(Array(40 - FAILURES).fill(429));
  });

  it("counts the addresses of one IPv6 /64 as one client", async () => {
    const statuses = await guessFrom((i) => `2001:db8:77:1:${(i + 1).toString(16)}::1`, 20);
    expect(statuses.slice(0, FAILURES)).toEqual(Array(FAILURES).fill(401));
    expect(statuses.slice(FAILURES)).toEqual(Array(20 - FAILURES).fill(429));
  });
});
