import type { Duplex } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import { HttpError, unavailable } from "../http/errors.js";

// The request bodies one project has an edge hold at once, by their declared sizes: taken once the
// key is known and the size checked (before the body is read), given back when the answer is sent
// or the connection is gone, whichever comes first. Past EDGE_MAX_BYTES_IN_FLIGHT the project's
// next request is answered 503 before its body is read, as the backlog bound answers: what an edge
// holds for a project no longer grows with its connections × body size. Per project, after
// authentication: a client without a key holds nothing, and a tenant sending slowly, or a lot,
// fills only its own share. A project's first request is always let in (its route's body limit
// applies). The default (32 MiB) is above what 512 connections of 100-report batches hold
// (about 23 MB); it bounds memory, it does not tune RSS, which uncollected garbage dominates
// (docs/benchmarks.md).

export interface BodiesInFlight {
  /**
   * Holds the body `req` declares for its project until `reply` is sent or its socket closes; the
   * 413 for a declared size over `bodyLimit`, or the 503 when the project holds its bound already.
   */
  hold(req: FastifyRequest, reply: FastifyReply, project: string, bodyLimit: number): void;
  /** Bytes held now, every project's. */
  readonly bytes: number;
  /** Projects holding any. */
  readonly projects: number;
}

/**
 * What a request will hold: its Content-Length (which Node has checked is digits), or
 * `bodyLimit` for a body sent in chunks (its size is known only once read).
 */
export function declaredBytes(
  headers: { "content-length"?: string; "transfer-encoding"?: string },
  bodyLimit: number,
): number {
  const length = headers["content-length"];
  if (length !== undefined) return Number(length);
  return headers["transfer-encoding"] !== undefined ? bodyLimit : 0;
}

export function createBodiesInFlight(max: number): BodiesInFlight {
  const byProject = new Map<string, number>();
  let total = 0;
  const add = (project: string, n: number) => {
    const left = (byProject.get(project) ?? 0) + n;
    if (left <= 0) byProject.delete(project);
    else byProject.set(project, left);
    total += n;
  };
  return {
    get bytes() {
      return total;
    },
    get projects() {
      return byProject.size;
    },
    hold(req, reply, project, bodyLimit) {
      const size = declaredBytes(req.headers, bodyLimit);
      if (size > bodyLimit)
        throw new HttpError("payload_too_large", `the body is over ${bodyLimit} bytes`);
      if (size === 0) return;
      const held = byProject.get(project) ?? 0;
      if (held > 0 && held + size > max) {
        throw unavailable(
          "this project's reports arrive faster than this edge reads them: send again in a moment",
          "in_flight",
        );
      }
      add(project, size);
      onAnswerOrGone(req, reply, () => add(project, -size));
    },
  };
}

/**
 * Calls `fn` once: on the answer's "close", or the socket's, whichever comes first (a pipelined
 * answer still queued when the client goes away never gets its own).
 */
export function onAnswerOrGone(req: FastifyRequest, reply: FastifyReply, fn: () => void): void {
  const pending = pendingOf(req.raw.socket);
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    reply.raw.off("close", once);
    pending.delete(once);
    fn();
  };
  reply.raw.once("close", once);
  pending.add(once);
}

const PENDING = Symbol("headroom.bodiesInFlight");
type Tracked = Duplex & { [PENDING]?: Set<() => void> };

/** The gives of a socket's held bodies, all run by one "close" listener of its own. */
function pendingOf(socket: Duplex): Set<() => void> {
  const s = socket as Tracked;
  let pending = s[PENDING];
  if (!pending) {
    const set = new Set<() => void>();
    pending = set;
    s[PENDING] = set;
    socket.once("close", () => {
      for (const give of [...set]) give();
    });
  }
  return pending;
}
