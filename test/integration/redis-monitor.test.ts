import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { monitorRedis } from "../helpers/redis-monitor.js";

// The tests' MONITOR helper (read-api.scopes counts commands with it): started while the server
// streams other clients' commands, it reads each command whole. ioredis' own monitor() failed
// there in CI with "Command queue state error".

let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(() => redis.disconnect());

it("starts on a busy server and reads every command sent after its OK, escapes and all", async () => {
  const key = `monitor-${uniqueId()}`;
  let busy = true;
  const flood = (async () => {
    while (busy) await Promise.all(Array.from({ length: 100 }, (_, i) => redis.get(`${key}:${i}`)));
  })();
  try {
    const { host, port, username, password } = redis.options;
    // Each start comes while the flood streams, the case that threw.
    for (let round = 0; round < 20; round++) {
      const monitor = await monitorRedis({ host, port, username, password });
      const value = `a "quoted" \\ line\r\nwith\ttabs, \u0007, é and ✓ ${round}`;
      await redis.set(`${key}:marker`, value);
      await eventually(() =>
        expect(monitor.commands).toContainEqual(["set", `${key}:marker`, value]),
      );
      monitor.stop();
    }
  } finally {
    busy = false;
    await flood;
  }
});
