import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createDestinationPolicy } from "../../src/alerts/destination-policy.js";
import { createGuardedFetch } from "../../src/alerts/guarded-fetch.js";
import { newSecret, verify } from "../../src/alerts/signing.js";
import { sendWebhook } from "../../src/alerts/webhook-sender.js";

// One delivery against a local receiver: its status decides, and its body is never held.

let server: Server;
let url: string;
let chunksSent = 0;
// The receiver runs on loopback: allowed as an operator allows a receiver inside the network.
const guarded = createGuardedFetch(createDestinationPolicy({ allow: ["127.0.0.1"] }));
/** What the receiver got at /received: headers and the body's bytes as they came. */
let received: { headers: Record<string, string | string[] | undefined>; body: Buffer } | null =
  null;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/received") received = { headers: req.headers, body: Buffer.concat(chunks) };
      if (req.url === "/endless") {
        // 200, then a body that never ends: 64 KiB chunks as fast as the client takes them.
        res.writeHead(200, { "content-type": "application/octet-stream" });
        const chunk = Buffer.alloc(64 * 1024, 120);
        const more = () => {
          while (!res.destroyed && res.write(chunk)) chunksSent += 1;
        };
        res.on("drain", more);
        more();
        return;
      }
      res.writeHead(req.url === "/fail" ? 500 : 204).end(req.url === "/fail" ? "no" : undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  guarded.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const send = (path: string) =>
  // A timeout longer than the test's: only the body's being cut off can end an endless answer.
  sendWebhook({
    url: `${url}${path}`,
    id: "evt_1",
    body: "{}",
    secret: newSecret(),
    timeoutMs: 600_000,
    fetch: guarded.fetch,
  });

it("a 2xx is delivered, anything else is a failure", async () => {
  expect(await send("/ok")).toEqual({ ok: true, status: 204 });
  expect(await send("/fail")).toEqual({ ok: false, status: 500 });
});

it("an endless answer is cut off once past 64 KiB, not read to the timeout", async () => {
  expect(await send("/endless")).toEqual({ ok: true, status: 200 });
  // The receiver got ahead of the reader by its sockets' buffers, not by gigabytes.
  expect(chunksSent).toBeLessThan(1_000);
});

it("the signature verifies against the body the receiver got, byte for byte", async () => {
  const secret = newSecret();
  // Characters a re-encoding would change: non-ASCII, an escaped slash, U+2028, spacing.
  const body = '{"type":"headroom.alert", "data":{"app":"caf\\u00e9 \\/ é\u2028","n":1.50}}';
  const sent = await sendWebhook({
    url: `${url}/received`,
    id: "evt_42",
    body,
    secret,
    timeoutMs: 10_000,
    fetch: guarded.fetch,
  });
  expect(sent).toEqual({ ok: true, status: 204 });
  if (!received) throw new Error("the receiver got nothing");
  const got = received.body.toString("utf8");
  expect(got).toBe(body);
  expect(received.headers["webhook-id"]).toBe("evt_42");
  expect(received.headers["content-type"]).toBe("application/json");
  expect(verify(secret, received.headers, got)).toBe(true);
  // ... and only against it, with only this secret.
  expect(verify(secret, received.headers, `${got} `)).toBe(false);
  expect(verify(newSecret(), received.headers, got)).toBe(false);
});
