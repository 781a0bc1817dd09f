import type { FastifyReply, FastifyRequest } from "fastify";
import { onAnswerOrGone } from "./bytes-in-flight.js";

// The bodies of many reports (a batch, an OTLP export) an edge works on at once, by their sizes:
// from the moment a request's body has been read until its answer is sent, through its parse,
// validation, limits and the queue's acknowledgement. Past EDGE_MAX_BYTES_AT_WORK a request whose
// body was read waits for its turn: a project's requests in the order they came, projects in turn.
//
// Why: every request read used to go on at once and wait for the queue as parsed reports (512
// connections of 100-report batches kept 51,200 rows alive); living that long, they were promoted
// to V8's old generation and collected there. At 1 MiB at work the edge took 6.2-6.5 µs a report
// against 9.5, and peaked at 291-299 MB against 454-487 (docs/benchmarks.md). A waiting body is
// one Buffer, not thousands of objects. Projects in turn: a tenant that floods the edge waits
// behind its own requests, and another's next request goes at the next turn. A request whose
// client went away while it waited leaves the line and takes nothing, so a resend is a first send.

export interface TurnQueue {
  /**
   * `bytes` for `project`: taken at once (null) when nothing waits and they fit, or when nothing is
   * at work (a body over the bound goes alone); else a place in line, `granted` told at its turn.
   */
  enter(project: string, bytes: number, granted: () => void): Waiter | null;
  /** Takes a waiter out of line before its turn (its client went away). */
  leave(waiter: Waiter): void;
  /** Bytes of a request whose turn ended (its answer sent, or its client gone). */
  give(bytes: number): void;
  /** Bytes at work now. */
  readonly bytes: number;
  /** Requests waiting for a turn. */
  readonly waiting: number;
}

export interface Waiter {
  readonly project: string;
  readonly bytes: number;
  readonly granted: () => void;
}

export function createTurnQueue(maxBytes: number): TurnQueue {
  let atWork = 0;
  let waiting = 0;
  // Projects with requests in line, in turn: the first one's first request goes next, and the
  // project goes to the back while it has more.
  const lines = new Map<string, Waiter[]>();
  const fits = (bytes: number) => atWork === 0 || atWork + bytes <= maxBytes;

  function grant() {
    for (;;) {
      const next = lines.entries().next();
      if (next.done) return;
      const [project, line] = next.value;
      const first = line[0] as Waiter;
      // No smaller request passes one that does not fit: a large one is never starved.
      if (!fits(first.bytes)) return;
      line.shift();
      lines.delete(project);
      if (line.length > 0) lines.set(project, line);
      waiting--;
      atWork += first.bytes;
      first.granted();
    }
  }

  return {
    get bytes() {
      return atWork;
    },
    get waiting() {
      return waiting;
    },
    enter(project, bytes, granted) {
      if (lines.size === 0 && fits(bytes)) {
        atWork += bytes;
        return null;
      }
      const waiter: Waiter = { project, bytes, granted };
      const line = lines.get(project);
      if (line) line.push(waiter);
      else lines.set(project, [waiter]);
      waiting++;
      return waiter;
    },
    leave(waiter) {
      const line = lines.get(waiter.project);
      const at = line?.indexOf(waiter) ?? -1;
      if (!line || at < 0) return;
      line.splice(at, 1);
      waiting--;
      if (line.length === 0) lines.delete(waiter.project);
      // The first in line may be another now, one that fits.
      grant();
    },
    give(bytes) {
      atWork -= bytes;
      grant();
    },
  };
}

export interface WorkTurns {
  /**
   * Takes `req`'s turn for its body's `bytes`, given back by `end` or when its client is gone.
   * Resolves at its turn: true, or false when the client went away first (nothing of it may be
   * taken then). Undefined when taken at once.
   */
  take(
    req: FastifyRequest,
    reply: FastifyReply,
    project: string,
    bytes: number,
  ): Promise<boolean> | undefined;
  /**
   * Gives `req`'s turn back: its answer is made (onSend), though maybe not yet written. Not on the
   * answer's "close": a pipelined answer waits behind the one before it on its connection, and that
   * one may be waiting for this very turn.
   */
  end(req: FastifyRequest): void;
  readonly bytes: number;
  readonly waiting: number;
}

export function createWorkTurns(maxBytes: number): WorkTurns {
  const queue = createTurnQueue(maxBytes);
  const ends = new WeakMap<FastifyRequest, () => void>();
  return {
    get bytes() {
      return queue.bytes;
    },
    get waiting() {
      return queue.waiting;
    },
    take(req, reply, project, bytes) {
      if (bytes === 0) return undefined;
      // Gone already: its "close" came before any listener could hear it.
      if (req.raw.socket.destroyed) return Promise.resolve(false);
      let resolveTurn: (atWork: boolean) => void = () => {};
      let state: "waiting" | "working" | "done" = "working";
      const waiter = queue.enter(project, bytes, () => {
        state = "working";
        resolveTurn(true);
      });
      if (waiter) state = "waiting";
      const end = () => {
        if (state === "waiting" && waiter) {
          queue.leave(waiter);
          resolveTurn(false);
        } else if (state === "working") queue.give(bytes);
        state = "done";
      };
      ends.set(req, end);
      onAnswerOrGone(req, reply, end);
      if (!waiter) return undefined;
      return new Promise<boolean>((resolve) => {
        resolveTurn = resolve;
      });
    },
    end(req) {
      ends.get(req)?.();
    },
  };
}
