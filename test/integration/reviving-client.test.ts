import { Redis } from "ioredis";
import { afterEach, expect, inject, it } from "vitest";
import { RevivingRedis } from "../../src/redis/reviving-client.js";
import { eventually } from "../helpers/eventually.js";

// The Sentinel topology's client: when ioredis ends it without its owner asking (as after a
// failover announced mid-reconnect), it connects again; when its owner closes it, it stays closed.
// Here ioredis is made to end a client the same way, by a retryStrategy that gives up.

const url = inject("redisUrl");
const clients: Redis[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});
const track = <R extends Redis>(c: R): R => {
  clients.push(c);
  return c;
};

async function killConnection(client: Redis): Promise<void> {
  const admin = track(new Redis(url));
  const id = await client.client("ID");
  await admin.client("KILL", "ID", String(id));
}

const givesUp = { retryStrategy: () => null, lazyConnect: false };

it("a plain ioredis client ended by ioredis stays ended (the failure this guards against)", async () => {
  const plain = track(new Redis(url, givesUp));
  plain.on("error", () => {});
  await eventually(() => expect(plain.status).toBe("ready"));
  await killConnection(plain);
  await eventually(() => expect(plain.status).toBe("end"));
  await expect(plain.ping()).rejects.toThrow("Connection is closed");
});

it("a client ended by ioredis connects again, and so do its duplicates", async () => {
  const options = { ...new Redis(url, { lazyConnect: true }).options, ...givesUp };
  const client = track(new RevivingRedis(options));
  client.on("error", () => {});
  await eventually(() => expect(client.status).toBe("ready"));
  await killConnection(client);
  await eventually(async () => expect(await client.ping()).toBe("PONG"), { timeoutMs: 10_000 });

  const copy = track(client.duplicate());
  copy.on("error", () => {});
  expect(copy).toBeInstanceOf(RevivingRedis);
  await eventually(() => expect(copy.status).toBe("ready"));
  await killConnection(copy);
  await eventually(async () => expect(await copy.ping()).toBe("PONG"), { timeoutMs: 10_000 });
});

it("a client its owner closed stays closed", async () => {
  const options = { ...new Redis(url, { lazyConnect: true }).options, ...givesUp };
  for (const close of [(c: Redis) => c.quit(), (c: Redis) => c.disconnect()]) {
    const client = track(new RevivingRedis(options));
    client.on("error", () => {});
    await eventually(() => expect(client.status).toBe("ready"));
    await close(client);
    await eventually(() => expect(client.status).toBe("end"));
    // Longer than the first reconnect's backoff (100 ms): a revival would have begun by now.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(client.status).toBe("end");
  }
});
