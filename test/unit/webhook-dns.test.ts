import { createSocket, type Socket } from "node:dgram";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWebhookResolver, WebhookDnsUnavailableError } from "../../src/alerts/webhook-dns.js";

// A webhook host's look-up is bounded: a DNS server that never answers costs the deadline, and a
// process's look-ups in flight are capped, so none of them waits on libuv's thread pool.

let silent: Socket;
let server = "";
let queries = 0;

beforeAll(async () => {
  // A DNS server stand-in that reads every query and never answers.
  silent = createSocket("udp4");
  silent.on("message", () => {
    queries++;
  });
  await new Promise<void>((r) => silent.bind(0, "127.0.0.1", r));
  server = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
});

afterAll(() => {
  silent?.close();
});

describe("createWebhookResolver", () => {
  it("gives up on a server that never answers at its deadline, retryable", async () => {
    const resolve = createWebhookResolver({ servers: [server], timeoutMs: 300, maxConcurrent: 4 });
    const t0 = Date.now();
    const before = queries;
    await expect(resolve("hooks.never-answers.example")).rejects.toThrow(
      new WebhookDnsUnavailableError(
        "the DNS look-up of hooks.never-answers.example did not answer within 300 ms: try again later",
      ),
    );
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(queries).toBeGreaterThan(before);
  });

  it("refuses a look-up at once past the process's cap, and takes one again when one ends", async () => {
    const resolve = createWebhookResolver({ servers: [server], timeoutMs: 500, maxConcurrent: 2 });
    const held = [resolve("a.example"), resolve("b.example")];
    const t0 = Date.now();
    await expect(resolve("c.example")).rejects.toThrow(
      /too many webhook look-ups in progress \(2\)/,
    );
    expect(Date.now() - t0).toBeLessThan(100);
    await Promise.allSettled(held);
    await expect(resolve("d.example")).rejects.toThrow(/did not answer within 500 ms/);
  });

  it("localhost is 127.0.0.1, without a query", async () => {
    const resolve = createWebhookResolver({ servers: [server], timeoutMs: 300, maxConcurrent: 1 });
    const before = queries;
    expect(await resolve("localhost")).toEqual([{ address: "127.0.0.1", family: 4 }]);
    expect(await resolve("api.LocalHost")).toEqual([{ address: "127.0.0.1", family: 4 }]);
    expect(queries).toBe(before);
  });
});
