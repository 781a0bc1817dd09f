import { connect, type Socket } from "node:net";
import { type LoadResult, type LoadSpec, latencyOf, REPORT_PATH } from "./load-spec.js";

// Open-loop load at a fixed rate: request i is due at start + i/rate, whatever the answers do,
// and its latency counts from that moment (no coordinated omission). autocannon's overallRate is
// not used because it sends each second's quota as one burst at the top of the second.
// HTTP/1.1 keep-alive over plain sockets, one request at a time per connection; responses are
// read by Content-Length, which Fastify always sends. With several servers (edges), connection k
// goes to server k mod n. (Debian's wrk has no fixed-rate mode; wrk2, which has, is not packaged.)

const HEADER_END = Buffer.from("\r\n\r\n");
const CONTENT_LENGTH = /\r\ncontent-length:\s*(\d+)/i;
/** How long the answers to the last requests are waited for after the sending window. */
const GRACE_MS = 10_000;

interface Conn {
  /** Which server (index into the spec's urls). */
  server: number;
  socket: Socket;
  busy: boolean;
  /** Index of the request in flight. */
  index: number;
  buffer: Buffer;
}

export function runFixedRate(
  spec: LoadSpec,
  bodies: string[],
  keys: string[],
): Promise<LoadResult> {
  const rate = spec.rate ?? 1_000;
  const servers = spec.urls.map((u) => new URL(u));
  const total = Math.max(1, Math.round(rate * spec.durationS));
  const latencies = new Float64Array(total);
  const statuses: Record<string, number> = {};
  const ready: number[] = []; // due, not yet sent (request indices, in order)
  let readyHead = 0;
  let scheduled = 0;
  let sent = 0;
  let answered = 0;
  let ok = 0;
  let errors = 0;
  let stopping = false;
  let lastAnswerAt = 0;
  let start = 0;
  let startedAt = 0;
  const dueAt = (i: number) => start + (i * 1000) / rate;

  const encoded = bodies.map((b) => Buffer.from(b));
  const request = (i: number, server: number) => {
    const body = encoded[i % encoded.length] as Buffer;
    const head =
      `POST ${REPORT_PATH} HTTP/1.1\r\nHost: ${servers[server]?.host}\r\n` +
      `Content-Type: application/json\r\nAuthorization: Bearer ${keys[i % keys.length]}\r\n` +
      `Content-Length: ${body.length}\r\n\r\n`;
    return Buffer.concat([Buffer.from(head), body]);
  };

  return new Promise<LoadResult>((resolve) => {
    const conns: Conn[] = [];
    const idle: Conn[] = [];

    const finishRequest = (c: Conn, status: number | null) => {
      lastAnswerAt = performance.now();
      latencies[answered++] = lastAnswerAt - dueAt(c.index);
      if (status === null) errors++;
      else if (status === 200) ok++;
      else statuses[status] = (statuses[status] ?? 0) + 1;
      c.busy = false;
      idle.push(c);
      dispatch();
    };

    const open = (server: number): Conn => {
      const url = servers[server] as URL;
      const c: Conn = {
        server,
        socket: connect(Number(url.port || 80), url.hostname),
        busy: false,
        index: -1,
        buffer: Buffer.alloc(0),
      };
      c.socket.setNoDelay(true);
      c.socket.on("data", (chunk: Buffer) => {
        c.buffer = c.buffer.length ? Buffer.concat([c.buffer, chunk]) : chunk;
        const end = c.buffer.indexOf(HEADER_END);
        if (end < 0) return;
        const head = c.buffer.subarray(0, end).toString("latin1");
        const length = Number(CONTENT_LENGTH.exec(head)?.[1] ?? 0);
        if (c.buffer.length < end + 4 + length) return;
        c.buffer = c.buffer.subarray(end + 4 + length);
        finishRequest(c, Number(head.slice(9, 12)));
      });
      c.socket.on("error", () => {});
      c.socket.on("close", () => {
        const at = conns.indexOf(c);
        if (at >= 0) conns.splice(at, 1);
        const idleAt = idle.indexOf(c);
        if (idleAt >= 0) idle.splice(idleAt, 1);
        if (c.busy) {
          c.busy = false;
          latencies[answered++] = performance.now() - dueAt(c.index);
          errors++;
        }
        if (!stopping) {
          const next = open(c.server);
          conns.push(next);
          next.socket.once("connect", () => {
            idle.push(next);
            dispatch();
          });
        }
      });
      return c;
    };

    function dispatch() {
      while (readyHead < ready.length && idle.length > 0) {
        const c = idle.pop() as Conn;
        const i = ready[readyHead++] as number;
        c.busy = true;
        c.index = i;
        sent++;
        c.socket.write(request(i, c.server));
      }
      if (readyHead > 4_096 && readyHead * 2 > ready.length) {
        ready.splice(0, readyHead);
        readyHead = 0;
      }
    }

    const finish = () => {
      clearInterval(ticker);
      clearTimeout(deadline);
      clearTimeout(connectTimer);
      stopping = true;
      for (const c of conns) c.socket.destroy();
      // Requests still unanswered at the deadline count as errors (timeouts).
      errors += sent - answered;
      const windowS = spec.durationS;
      // Answers that came after the window (a target that fell behind) stretch the time base.
      const activeS = Math.max(windowS, (lastAnswerAt - start) / 1000);
      resolve({
        mode: "fixed",
        durationS: windowS,
        startedAt,
        sent,
        ok,
        okPerSec: Math.round(ok / activeS),
        statuses,
        errors,
        latencyMs: latencyOf(latencies.subarray(0, answered)),
        unsent: total - sent,
        generatorCores: 0,
        generatorCpuS: 0,
        generator: "open-loop client",
        generators: 1,
      });
    };

    let ticker: NodeJS.Timeout | undefined;
    let deadline: NodeJS.Timeout | undefined;
    const begin = () => {
      if (start > 0) return;
      clearTimeout(connectTimer);
      start = performance.now();
      startedAt = Date.now();
      ticker = setInterval(() => {
        const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
        while (scheduled < due) ready.push(scheduled++);
        dispatch();
        if (scheduled === total && answered === sent && readyHead >= ready.length) finish();
      }, 1);
      deadline = setTimeout(finish, spec.durationS * 1000 + GRACE_MS);
    };

    // The clock starts once every connection is open, so connecting is not counted as latency.
    let connecting = spec.connections;
    const connectTimer = setTimeout(begin, 5_000);
    for (let k = 0; k < spec.connections; k++) {
      const c = open(k % servers.length);
      conns.push(c);
      c.socket.once("connect", () => {
        idle.push(c);
        if (--connecting === 0) begin();
        else if (start > 0) dispatch();
      });
    }
  });
}
