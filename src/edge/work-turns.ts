import type { FastifyReply, FastifyRequest } from "fastify";
import { unavailable } from "../http/errors.js";
import { onAnswerOrGone } from "./bytes-in-flight.js";

// The bodies of many reports (a batch, an OTLP export) an edge works on at once, by their sizes:
// from the moment a request's body has been read until its answer is made, through its parse,
// validation, limits and the queue's acknowledgement. Past EDGE_MAX_BYTES_AT_WORK a request whose
// body was read waits for its turn: a project's requests in the order they came, projects in turn.
//
// Why: every request read used to go on at once and wait for the queue as parsed reports (512
// connections of 100-report batches kept 51,200 rows alive); living that long, they were promoted
// to V8's old generation and collected there. With 1 MiB at work, in alternating runs, the edge
// took 6.2-6.5 µs a report against 8.3-8.9, and peaked at 306-336 MB against 475-516
// (docs/benchmarks.md). A waiting body is one Buffer, not thousands of objects. Projects in turn,
// one request a turn: a project's many requests wait behind each other, and another project's next
// request goes at the next turn. A request whose client went away while it waited leaves the line
// and takes nothing, so a resend is a first send; one at work when its client goes keeps its bytes
// until its answer is made, since its work goes on.

export interface TurnQueue {
  /**
   * `bytes` for `project`: taken at once (null) when nothing waits and they fit, or when nothing is
   * at work (a body over the bound goes alone); else a place in line, `granted` told at its turn.
   */
  enter(project: string, bytes: number, granted: () => void): Waiter | null;
  /** Takes a waiter out of line before its turn (its client went away). */
  leave(waiter: Waiter): void;
  /** Bytes of a request whose turn ended (its answer made). */
  give(bytes: number): void;
  /** Bytes at work now. */
  readonly bytes: number;
  /** Requests waiting for a turn. */
  readonly waiting: number;
  /** Requests of `project` waiting for a turn. */
  waitingOf(project: string): number;
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
    waitingOf(project) {
      return lines.get(project)?.length ?? 0;
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
   * Takes `req`'s turn for its body's `bytes`, given back by `end`. Resolves at its turn: true, or
   * false when the client went away first (out of line; nothing of it may be taken then).
   * Undefined when taken at once. Throws the 503 when its project has too many waiting.
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

/**
 * Requests one project may have waiting on one edge: past it, its next is answered 503 (a line
 * grows only while a project sends faster than its turns come; pipelined requests that wait send
 * no answer, so nothing else slows their connection down).
 */
export const MAX_WAITING_PER_PROJECT = 1_024;

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
      if (queue.waitingOf(project) >= MAX_WAITING_PER_PROJECT) {
        throw unavailable(
          "this project's reports arrive faster than this edge works on them: send again in a moment",
          "in_flight",
        );
      }
      let resolveTurn: (atWork: boolean) => void = () => {};
      const turn = new Promise<boolean>((resolve) => {
        resolveTurn = resolve;
      });
      let state: "waiting" | "working" | "done" = "waiting";
      const waiter = queue.enter(project, bytes, () => {
        state = "working";
        resolveTurn(true);
      });
      if (!waiter) state = "working";
      const leave = () => {
        queue.leave(waiter as Waiter);
        state = "done";
        resolveTurn(false);
      };
      ends.set(req, () => {
        if (state === "waiting") leave();
        else if (state === "working") queue.give(bytes);
        state = "done";
      });
      // Gone while it waits: out of line. Gone at work: its work goes on (parse, Redis) until its
      // answer is made, and its bytes stay counted until then.
      onAnswerOrGone(req, reply, () => {
        if (state === "waiting") leave();
      });
      return waiter ? turn : undefined;
    },
    end(req) {
      ends.get(req)?.();
    },
  };
}
