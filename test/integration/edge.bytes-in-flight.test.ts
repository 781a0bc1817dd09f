import type { AddressInfo } from "node:net";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { generateKey } from "../../src/keys/key-format.js";
import {
  clientReport,
  type EdgeFixture,
  edgeMetric,
  startEdge,
  type TestKey,
} from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { startRespCutProxy } from "../helpers/resp-cut-proxy.js";

// EDGE_MAX_BYTES_IN_FLIGHT on a real edge over TCP: a project's request whose body has not arrived
// yet holds its declared size once its key is known; the project's next one that would pass the
// bound is answered 503 (reason in_flight, Retry-After) without its body being read, while other
// projects are served; the bytes come back when the answer is sent, or when the client goes away
// mid-body, or when it resets with pipelined answers still queued behind one being made. A
// request without a good key, or declaring more than the body limit, holds nothing.

const MAX = 64 * 1024;

let fx: EdgeFixture;
let k: TestKey;
let other: TestKey;
let port: number;

beforeAll(async () => {
  fx = await startEdge({ env: { EDGE_MAX_BYTES_IN_FLIGHT: String(MAX) } });
  k = await fx.createKey();
  other = await fx.createKey();
  await fx.edge.app.listen({ host: "127.0.0.1", port: 0 });
  port = (fx.edge.app.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await fx?.close();
});

/** A POST of `length` declared bytes whose body is not sent: the socket, open. */
function heldPost(length: number | string, key = k.key): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => {
      s.write(
        `POST /api/reports HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer ${key}\r\ncontent-length: ${length}\r\n\r\n`,
      );
      resolve(s);
    });
    s.on("error", reject);
  });
}

const post = (body: unknown, key = k.key) =>
  fetch(`http://127.0.0.1:${port}/api/report`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });

const metric = (name: string, labels = "", edge = fx.edge) => edgeMetric(edge, name, labels);

const held = () => metric("headroom_edge_bytes_in_flight");
const refusedInFlight = () => metric("headroom_unavailable_total", '{reason="in_flight"}');

describe("EDGE_MAX_BYTES_IN_FLIGHT", () => {
  it("answers 503 past the bound before reading the body, and takes reports again once bytes are freed", async () => {
    const recordsBefore = (await fx.records()).length;
    const refusedBefore = await refusedInFlight();
    const slow = await heldPost(MAX - 100);
    try {
      await eventually(async () => expect(await held()).toBe(MAX - 100), { timeoutMs: 5_000 });
      const refused = await post(clientReport());
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(await refused.json()).toMatchObject({ error: "unavailable" });
      expect(await refusedInFlight()).toBe(refusedBefore + 1);
      // Another project's reports are taken meanwhile.
      expect((await post(clientReport(), other.key)).status).toBe(200);
    } finally {
      // The client goes away mid-body: its bytes are freed.
      slow.destroy();
    }
    await eventually(async () => expect(await held()).toBe(0), { timeoutMs: 5_000 });
    const taken = await post(clientReport());
    expect(taken.status).toBe(200);
    expect(await held()).toBe(0);
    // This project's, and the other project's taken while the bytes were held.
    expect(await fx.records()).toHaveLength(recordsBefore + 2);
  });

  it("holds nothing for a request without a good key, or declaring more than the body limit", async () => {
    const sockets = [
      await heldPost(MAX, "hr_not-a-key"),
      await heldPost("18446744073709551615"),
      await heldPost(MAX, generateKey()),
    ];
    try {
      // Each is answered (401, 413, 401) without its body, and holds nothing.
      const answers = await Promise.all(
        sockets.map(
          (s) =>
            new Promise<string>((resolve) => s.once("data", (d: Buffer) => resolve(d.toString()))),
        ),
      );
      expect(answers.map((a) => a.slice(9, 12))).toStrictEqual(["401", "413", "401"]);
      expect(await held()).toBe(0);
      expect((await post(clientReport())).status).toBe(200);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });

  it("gives back the bytes of pipelined answers still queued when the client resets", async () => {
    // An edge of its own whose job writes wait in a proxy until released: its answers are not
    // made before the client resets, so the second request's answer is still queued behind the
    // first's (Node answers a connection's requests in order) and never gets a "close" of its own.
    const proxy = await startRespCutProxy(Number(new URL(inject("redisUrl")).port));
    const slow = await startEdge({
      redisUrl: `redis://127.0.0.1:${proxy.port}`,
      env: { EDGE_MAX_BYTES_IN_FLIGHT: String(MAX) },
    });
    let client: Socket | undefined;
    try {
      const { key } = await slow.createKey();
      await slow.edge.app.listen({ host: "127.0.0.1", port: 0 });
      const slowPort = (slow.edge.app.server.address() as AddressInfo).port;
      const inFlight = () => metric("headroom_edge_bytes_in_flight", "", slow.edge);
      // The job's add: a script call on the queue's keys carrying the reports' rows.
      const prefix = slow.config.QUEUE_PREFIX;
      proxy.arm(
        (args) => args.some((a) => a.includes(prefix)) && args.some((a) => a.includes('"rows"')),
        1,
        "hold",
      );
      const body = JSON.stringify(clientReport());
      const request =
        "POST /api/report HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
        `authorization: Bearer ${key}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const socket = connect(slowPort, "127.0.0.1");
      client = socket;
      socket.on("error", () => {});
      await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
      socket.write(request + request);
      // The job's add waits in the proxy, so neither is answered; both bodies are held.
      await eventually(() => expect(proxy.cut(), "the job's add is held").not.toBeNull(), {
        timeoutMs: 10_000,
      });
      await eventually(async () => expect(await inFlight()).toBe(2 * Buffer.byteLength(body)), {
        timeoutMs: 10_000,
      });
      socket.resetAndDestroy();
      // Given back while the answers are still being made: the queued one's by its socket.
      await eventually(async () => expect(await inFlight()).toBe(0), { timeoutMs: 10_000 });
    } finally {
      client?.destroy();
      proxy.release();
      await slow.close();
      await proxy.close();
    }
  });

  it("lets a project's first request in whatever its size while it holds nothing else", async () => {
    const reports = Array.from({ length: 400 }, () => clientReport());
    const body = JSON.stringify(reports);
    expect(body.length).toBeGreaterThan(MAX);
    const res = await fetch(`http://127.0.0.1:${port}/api/reports`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${k.key}` },
      body,
    });
    expect(res.status).toBe(200);
    await eventually(async () => expect(await held()).toBe(0), { timeoutMs: 5_000 });
  });
});
