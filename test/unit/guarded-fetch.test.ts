import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  createDestinationPolicy,
  DestinationRefusedError,
} from "../../src/alerts/destination-policy.js";
import { createGuardedFetch } from "../../src/alerts/guarded-fetch.js";
import type { Resolver } from "../../src/alerts/webhook-dns.js";

// The webhook sender's fetch on kept-alive connections: a receiver that closes an idle connection
// as the next delivery is written on it (Node's own server does after 5 s idle; alerts.stall's CI
// failure was this race, the delivery dead-lettered with "read ECONNRESET") gets that delivery
// once more, on a connection of its own, under the same destination checks. A reset on a fresh
// connection is not retried.

const allowLoopback = () => createGuardedFetch(createDestinationPolicy({ allow: ["127.0.0.1"] }));
let server: Server;
let url = "";
/** Requests read, in order: the connection each came on, and whether it was reset unanswered. */
const seen: { connection: number; reset: boolean }[] = [];
let resetSecondOnConnection = true;
let resetFirstOnConnection = false;

beforeAll(async () => {
  const connectionOf = new WeakMap<Socket, { n: number; requests: number }>();
  let connections = 0;
  server = createServer((req: IncomingMessage, res) => {
    const socket = req.socket;
    let c = connectionOf.get(socket);
    if (!c) {
      c = { n: ++connections, requests: 0 };
      connectionOf.set(socket, c);
    }
    c.requests += 1;
    const reset =
      (resetSecondOnConnection && c.requests === 2) || (resetFirstOnConnection && c.requests === 1);
    seen.push({ connection: c.n, reset });
    req.resume();
    req.on("end", () => {
      if (reset) socket.resetAndDestroy();
      else res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const post = (guarded: ReturnType<typeof allowLoopback>) =>
  guarded.fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: '{"n":1}',
    signal: AbortSignal.timeout(10_000),
  });

it("sends a delivery once more on a connection of its own when the kept-alive one is reset unanswered", async () => {
  seen.length = 0;
  resetSecondOnConnection = true;
  resetFirstOnConnection = false;
  const guarded = allowLoopback();
  try {
    const first = await post(guarded);
    expect(await first.text()).toBe("ok");
    const second = await post(guarded);
    expect(second.status).toBe(200);
    expect(await second.text()).toBe("ok");
  } finally {
    guarded.close();
  }
  // The second went on the first's connection, was reset, and went again on a new one.
  expect(seen.map((r) => r.reset)).toStrictEqual([false, true, false]);
  const [a, b, c] = seen.map((r) => r.connection);
  expect(b).toBe(a);
  expect(c).not.toBe(b);
});

it("does not send again a delivery reset on a connection of its own", async () => {
  seen.length = 0;
  resetSecondOnConnection = false;
  resetFirstOnConnection = true;
  const fresh = allowLoopback();
  try {
    await expect(post(fresh)).rejects.toMatchObject({ code: "ECONNRESET" });
    expect(seen).toHaveLength(1);
  } finally {
    fresh.close();
  }
});

it("checks the new connection of a delivery sent once more: a name now resolving inside the network is refused", async () => {
  seen.length = 0;
  resetSecondOnConnection = true;
  resetFirstOnConnection = false;
  // Allowed at 127.0.0.1 for the first delivery; by the second, the name resolves to the cloud
  // metadata address (DNS rebinding), and the reused connection is reset unanswered.
  let answers = ["127.0.0.1"];
  const resolve: Resolver = async () => answers.map((address) => ({ address, family: 4 }));
  const guarded = createGuardedFetch(createDestinationPolicy({ allow: ["127.0.0.1"], resolve }));
  const hook = url.replace("127.0.0.1", "hooks.example");
  const send = () =>
    guarded.fetch(hook, {
      method: "POST",
      headers: {},
      body: "{}",
      signal: AbortSignal.timeout(10_000),
    });
  try {
    expect(await (await send()).text()).toBe("ok");
    answers = ["169.254.169.254"];
    const refused = await send().then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(DestinationRefusedError);
    expect((refused as Error).message).toMatch(
      /destination refused: hooks\.example resolves to 169\.254\.169\.254/,
    );
    // The first, and the second on its kept-alive connection; nothing went anywhere else.
    expect(seen.map((r) => r.reset)).toStrictEqual([false, true]);
  } finally {
    guarded.close();
  }
});
