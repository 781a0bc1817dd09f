import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  clientReport,
  type EdgeFixture,
  edgeMetric,
  startEdge,
  type TestKey,
} from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { startRespCutProxy } from "../helpers/resp-cut-proxy.js";

// EDGE_MAX_BYTES_AT_WORK on a real edge over TCP, its Redis behind a proxy that holds a job's add
// until released: while one batch is at work (its job unacknowledged), a batch read next waits
// for its turn, is answered only after the one before it, projects in turn, and every report of
// each is queued once; a batch whose client leaves while it waits takes nothing, and gives its
// turn to the next; one whose client leaves while it is at work keeps its turn until its answer
// is made; two batches pipelined on one connection, the second's turn first, are both
// answered (a turn is given back once its answer is made, not once it is written).

const MAX = 64 * 1024;
/** A batch over half the bound: one at work at a time. */
const REPORTS = 150;

let fx: EdgeFixture;
let proxy: Awaited<ReturnType<typeof startRespCutProxy>>;
let a: TestKey;
let b: TestKey;
let c: TestKey;
let port: number;

beforeAll(async () => {
  proxy = await startRespCutProxy(Number(new URL(inject("redisUrl")).port));
  fx = await startEdge({
    redisUrl: `redis://127.0.0.1:${proxy.port}`,
    env: { EDGE_MAX_BYTES_AT_WORK: String(MAX) },
  });
  a = await fx.createKey();
  b = await fx.createKey();
  c = await fx.createKey();
  await fx.edge.app.listen({ host: "127.0.0.1", port: 0 });
  port = (fx.edge.app.server.address() as AddressInfo).port;
});

afterAll(async () => {
  proxy?.release();
  await fx?.close();
  await proxy?.close();
});

const batchBody = () => {
  const body = JSON.stringify(Array.from({ length: REPORTS }, () => clientReport()));
  expect(Buffer.byteLength(body)).toBeGreaterThan(MAX / 2);
  expect(Buffer.byteLength(body)).toBeLessThan(MAX);
  return body;
};

const rawPost = (key: TestKey, body: string) =>
  `POST /api/reports HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer ${key.key}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

const postBatch = (key: TestKey) =>
  fetch(`http://127.0.0.1:${port}/api/reports`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key.key}` },
    body: batchBody(),
  });

const metric = (name: string) => edgeMetric(fx.edge, name);
const awaitingTurn = () => metric("headroom_edge_requests_awaiting_turn");
const atWork = () => metric("headroom_edge_bytes_at_work");

/** Holds the next job's add in the proxy, and waits until it is held: a batch is at work. */
function holdNextJob(): void {
  const prefix = fx.config.QUEUE_PREFIX;
  proxy.arm(
    (args) =>
      args.some((x) => x.includes(prefix)) &&
      args.some((x) => x.includes('"groups"') || x.includes('"rows"')),
    1,
    "hold",
  );
}

async function queued(): Promise<number> {
  return (await fx.records()).length;
}

describe("EDGE_MAX_BYTES_AT_WORK", () => {
  it("lines up batches read while the bound is at work, answers them in turn, projects in turn, and queues each once", async () => {
    // Each key known to the edge before the job is held (its lookup must not wait behind it).
    for (const k of [a, b]) expect((await postBatch(k)).status).toBe(200);
    const before = await queued();
    holdNextJob();
    const order: string[] = [];
    const send = (name: string, key: TestKey) =>
      postBatch(key).then(async (res) => {
        order.push(name);
        return res;
      });
    const answers = [send("a1", a)];
    await eventually(() => expect(proxy.cut(), "a1's job is held").not.toBeNull(), {
      timeoutMs: 10_000,
    });
    expect(await atWork()).toBeGreaterThan(MAX / 2);
    // Read one after the other: a2 and a3 line up behind a1, then b1.
    const lined: [string, TestKey][] = [
      ["a2", a],
      ["a3", a],
      ["b1", b],
    ];
    for (const [i, [name, key]] of lined.entries()) {
      answers.push(send(name, key));
      await eventually(async () => expect(await awaitingTurn()).toBe(i + 1), {
        timeoutMs: 10_000,
      });
    }
    expect(order).toStrictEqual([]);
    proxy.disarm();
    proxy.release();
    const statuses = await Promise.all(answers.map(async (r) => (await r).status));
    expect(statuses).toStrictEqual([200, 200, 200, 200]);
    // a's line had its turn, then b's: a flood waits behind itself.
    expect(order).toStrictEqual(["a1", "a2", "b1", "a3"]);
    expect(await queued()).toBe(before + 4 * REPORTS);
    await eventually(async () => expect(await atWork()).toBe(0), { timeoutMs: 5_000 });
    expect(await awaitingTurn()).toBe(0);
  });

  it("takes nothing of a batch whose client leaves while it waits, and gives its turn on", async () => {
    const before = await queued();
    holdNextJob();
    const first = postBatch(a);
    await eventually(() => expect(proxy.cut(), "the first job is held").not.toBeNull(), {
      timeoutMs: 10_000,
    });
    const body = batchBody();
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(rawPost(b, body));
    await eventually(async () => expect(await awaitingTurn()).toBe(1), { timeoutMs: 10_000 });
    socket.destroy();
    await eventually(async () => expect(await awaitingTurn()).toBe(0), { timeoutMs: 10_000 });
    proxy.disarm();
    proxy.release();
    expect((await first).status).toBe(200);
    await eventually(async () => expect(await atWork()).toBe(0), { timeoutMs: 5_000 });
    // Only the first batch's reports: the one that left was never taken, so a resend is a first.
    expect(await queued()).toBe(before + REPORTS);
    // The edge takes batches as before: no turn was kept by the one that left.
    expect((await postBatch(b)).status).toBe(200);
    expect(await queued()).toBe(before + 2 * REPORTS);
  });

  it("answers two batches pipelined on one connection when the second has its turn first", async () => {
    for (const k of [a, b, c]) expect((await postBatch(k)).status).toBe(200);
    const before = await queued();
    holdNextJob();
    const z = postBatch(b);
    await eventually(() => expect(proxy.cut(), "b's job is held").not.toBeNull(), {
      timeoutMs: 10_000,
    });
    // a's line: a0, then the connection's first batch; c's: its second. c's turn comes before
    // a's second, and c's answer is written only after the first's, which waits for a turn.
    const a0 = postBatch(a);
    await eventually(async () => expect(await awaitingTurn()).toBe(1), { timeoutMs: 10_000 });
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    let received = "";
    const bothAnswered = new Promise<string>((resolve) =>
      socket.on("data", (d: Buffer) => {
        received += d.toString();
        if ((received.match(/HTTP\/1\.1 \d{3}/g) ?? []).length === 2) resolve(received);
      }),
    );
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(rawPost(a, batchBody()) + rawPost(c, batchBody()));
    await eventually(async () => expect(await awaitingTurn()).toBe(3), { timeoutMs: 10_000 });
    proxy.disarm();
    proxy.release();
    try {
      expect([(await z).status, (await a0).status]).toStrictEqual([200, 200]);
      let timer: NodeJS.Timeout | undefined;
      const answers = await Promise.race([
        bothAnswered,
        new Promise<string>((resolve) => {
          timer = setTimeout(() => resolve(`no answer in 15 s, only: ${received}`), 15_000);
        }),
      ]).finally(() => clearTimeout(timer));
      expect(answers.match(/HTTP\/1\.1 \d{3}/g)).toStrictEqual(["HTTP/1.1 200", "HTTP/1.1 200"]);
    } finally {
      socket.destroy();
    }
    expect(await queued()).toBe(before + 4 * REPORTS);
    await eventually(async () => expect(await atWork()).toBe(0), { timeoutMs: 5_000 });
  });

  it("keeps the turn of a batch whose client leaves while it is at work, until its answer is made", async () => {
    for (const k of [a, b]) expect((await postBatch(k)).status).toBe(200);
    const before = await queued();
    holdNextJob();
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(rawPost(a, batchBody()));
    await eventually(() => expect(proxy.cut(), "the job is held").not.toBeNull(), {
      timeoutMs: 10_000,
    });
    const next = postBatch(b);
    await eventually(async () => expect(await awaitingTurn()).toBe(1), { timeoutMs: 10_000 });
    const connections = () =>
      new Promise<number>((resolve, reject) =>
        fx.edge.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      );
    const open = await connections();
    socket.destroy();
    await eventually(async () => expect(await connections()).toBe(open - 1), { timeoutMs: 10_000 });
    // Its job is still being written: its bytes stay at work, and the next batch waits.
    expect(await awaitingTurn()).toBe(1);
    expect(await atWork()).toBeGreaterThan(MAX / 2);
    proxy.disarm();
    proxy.release();
    expect((await next).status).toBe(200);
    // Both taken: the first's job was written, though no answer could reach its client.
    expect(await queued()).toBe(before + 2 * REPORTS);
    await eventually(async () => expect(await atWork()).toBe(0), { timeoutMs: 5_000 });
  });
});
