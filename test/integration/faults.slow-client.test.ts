import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import { queuedRecords } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import {
  crashLines,
  type FaultStack,
  startFaultStack,
  taggedBody,
  tagOf,
} from "../helpers/fault-stack.js";
import { startLoad } from "../helpers/load.js";

// Slow clients against a real edge process: headers or body trickled a byte at a time, or
// stopped half way. Each is cut off with the contract's 408 within its timeout (headers: 1 s,
// whole request: 2 s), while other clients are served at the same time as if nothing happened.
// Node sweeps for requests over their time every `connectionsCheckingInterval` (30 s unless set)
// and drops an idle socket without an answer after `connectionTimeout`: the edge sets both so
// that the timeout is what the client sees, on time.

const HEADERS_MS = 1_000;
const REQUEST_MS = 2_000;
/** The edge's sweep for requests over their time: a quarter of the shorter timeout. */
const SWEEP_MS = HEADERS_MS / 4;

let s: FaultStack;
let edge: Awaited<ReturnType<FaultStack["startEdge"]>>;

beforeAll(async () => {
  s = await startFaultStack();
  edge = await s.startEdge({
    HEADERS_TIMEOUT_MS: String(HEADERS_MS),
    REQUEST_TIMEOUT_MS: String(REQUEST_MS),
  });
});

afterAll(async () => {
  await s?.close();
});

interface Cut {
  ms: number;
  /** performance.now() when the server closed the connection. */
  end: number;
  text: string;
}

/** Opens a raw connection, lets `talk` write to it, resolves when the server closes it. */
function slowClient(port: number, talk: (sock: Socket) => void): Promise<Cut> {
  return new Promise((resolve) => {
    const started = performance.now();
    const sock = connect(port, "127.0.0.1");
    let text = "";
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => {
      text += d;
    });
    sock.on("error", () => {});
    sock.on("close", () => {
      const end = performance.now();
      resolve({ ms: end - started, end, text });
    });
    // A bound on the test, not on the server: far past every timeout.
    setTimeout(() => sock.destroy(), 20_000).unref();
    talk(sock);
  });
}

/** Writes `text` one character every `everyMs` for as long as the socket is open. */
function trickle(sock: Socket, text: string, everyMs = 100) {
  let i = 0;
  const timer = setInterval(() => {
    if (sock.destroyed || !sock.writable) return clearInterval(timer);
    sock.write(text[i % text.length] as string);
    i++;
  }, everyMs);
  sock.on("close", () => clearInterval(timer));
}

const head = (key: string, extra = "") =>
  `POST /api/report HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n${extra}`;

function expect408(cut: Cut, timeoutMs: number) {
  const [status, ...rest] = cut.text.split("\r\n");
  expect(status).toBe("HTTP/1.1 408 Request Timeout");
  expect(rest).toContain("Content-Type: application/json; charset=utf-8");
  expect(rest).toContain("Connection: close");
  const body = cut.text.slice(cut.text.indexOf("\r\n\r\n") + 4);
  expect(JSON.parse(body)).toStrictEqual({
    error: "request_timeout",
    message: "the request took too long",
  });
  expect(cut.ms).toBeGreaterThanOrEqual(timeoutMs - 50);
  // On time: after the timeout and the next sweep, not at Node's default 30 s sweep (or never).
  // The margin is one more timeout, for a loaded machine to schedule the sweep and the close.
  expect(cut.ms).toBeLessThan(2 * timeoutMs + SWEEP_MS);
}

const queuedApps = async () => new Set((await queuedRecords(s.queue)).map((r) => r.app));

it("slow headers and slow bodies get 408 on time while other clients are served", async () => {
  // The other test's reports share this edge's queue (their tags are its own).
  const queuedBefore = await queuedApps();
  const body = JSON.stringify(taggedBody(999_999));
  const load = startLoad({
    url: edge.url,
    key: s.key,
    body: taggedBody,
    concurrency: 4,
    ratePerSec: 100,
    maxMs: 30_000,
  });
  await eventually(() => expect(load.ok().length).toBeGreaterThan(20), { timeoutMs: 10_000 });

  // A small slowloris: many of each kind at once.
  const kinds = {
    trickledHeaders: () =>
      slowClient(edge.port, (sock) => {
        sock.write("POST /api/report HTTP/1.1\r\n");
        trickle(sock, "X-Slow: 1\r\n");
      }),
    stalledHeaders: () => slowClient(edge.port, (sock) => sock.write(head(s.key).slice(0, 40))),
    trickledBody: () =>
      slowClient(edge.port, (sock) => {
        sock.write(head(s.key, `Content-Length: ${body.length}\r\n\r\n`));
        trickle(sock, body);
      }),
    stalledBody: () =>
      slowClient(edge.port, (sock) =>
        sock.write(head(s.key, `Content-Length: ${body.length}\r\n\r\n${body.slice(0, 20)}`)),
      ),
    trickledChunks: () =>
      slowClient(edge.port, (sock) => {
        sock.write(head(s.key, "Transfer-Encoding: chunked\r\n\r\n"));
        trickle(sock, `1\r\n \r\n`, 50);
      }),
  };
  const slowStart = performance.now();
  const started = Object.fromEntries(
    Object.entries(kinds).map(([name, start]) => [
      name,
      Promise.all(Array.from({ length: 8 }, start)),
    ]),
  );
  const cuts = Object.fromEntries(
    await Promise.all(
      Object.entries(started).map(async ([name, all]) => [name, await all] as const),
    ),
  );
  const during = load.outcomes.length;
  await eventually(() => expect(load.outcomes.length).toBeGreaterThan(during + 20), {
    timeoutMs: 10_000,
  });
  const outcomes = await load.stop();

  for (const cut of [...(cuts.trickledHeaders ?? []), ...(cuts.stalledHeaders ?? [])]) {
    expect408(cut, HEADERS_MS);
  }
  for (const cut of [
    ...(cuts.trickledBody ?? []),
    ...(cuts.stalledBody ?? []),
    ...(cuts.trickledChunks ?? []),
  ]) {
    expect408(cut, REQUEST_MS);
  }

  // Everybody else: all 200, and served while every slow client was still held open — the
  // edge did not wait for a slow client's timeout before serving the others. (Their latency is
  // measured by `npm run bench`, not asserted on a machine shared with other work.)
  expect(outcomes.filter((o) => o.status !== 200)).toStrictEqual([]);
  const firstCut = Math.min(...Object.values(cuts).flatMap((c) => c.map((cut) => cut.end)));
  const servedMeanwhile = outcomes.filter((o) => o.start >= slowStart && o.end <= firstCut);
  expect(servedMeanwhile.length).toBeGreaterThanOrEqual(4);

  // Only the served clients' reports are queued: nothing from a request cut off.
  const queued = new Set([...(await queuedApps())].filter((app) => !queuedBefore.has(app)));
  expect(queued.has(tagOf(999_999))).toBe(false);
  expect(queued.size).toBe(outcomes.length);
  for (const o of outcomes) expect(queued.has(tagOf(o.seq))).toBe(true);
});

it("an idle keep-alive connection is not cut off with a 408", async () => {
  const answers: string[] = [];
  const sock = connect(edge.port, "127.0.0.1");
  sock.setEncoding("utf8");
  sock.on("data", (d: string) => answers.push(d));
  const request = (seq: number) => {
    const payload = JSON.stringify(taggedBody(2_000_000 + seq));
    sock.write(head(s.key, `Content-Length: ${payload.length}\r\n\r\n${payload}`));
  };
  await new Promise<void>((resolve) => sock.once("connect", () => resolve()));
  request(1);
  await eventually(() => expect(answers.join("")).toMatch(/^HTTP\/1.1 200 OK/));
  // Idle for longer than both timeouts: a keep-alive connection between requests is not a slow
  // request, and the client's next request on it must still be served.
  await sleep(REQUEST_MS * 1.5);
  // Status lines only: a report's random id may hold "408".
  expect(answers.join("").match(/^HTTP\/1\.1 \d{3}/gm)).toStrictEqual(["HTTP/1.1 200"]);
  expect(sock.destroyed).toBe(false);
  request(2);
  await eventually(() => expect(answers.join("").match(/HTTP\/1.1 200 OK/g)).toHaveLength(2));
  sock.destroy();

  expect(edge.proc.child.exitCode).toBeNull();
  expect(crashLines(edge.proc.output())).toStrictEqual([]);
});
