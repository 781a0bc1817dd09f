import { EventEmitter } from "node:events";
import type { FastifyReply, FastifyRequest } from "fastify";
import { describe, expect, it } from "vitest";
import { createBodiesInFlight, declaredBytes } from "../../src/edge/bytes-in-flight.js";

// The bound on request bodies a project has one edge hold at once: what is let in, per project,
// and that every body held is given back exactly once, by its answer or by its connection.

const LIMIT = 1_000;

/** A request on `socket` declaring `length`, and its reply. */
function request(socket: EventEmitter, length?: string) {
  const req = {
    headers: length === undefined ? {} : { "content-length": length },
    raw: { socket },
  } as unknown as FastifyRequest;
  const raw = new EventEmitter();
  return { req, reply: { raw } as unknown as FastifyReply, answered: () => raw.emit("close") };
}

const refusal = (f: () => void) => {
  try {
    f();
    return null;
  } catch (err) {
    return (err as { code?: string }).code;
  }
};

describe("createBodiesInFlight", () => {
  it("lets a project's bodies in up to the bound, refuses the next, and frees on the answer", () => {
    const bodies = createBodiesInFlight(100);
    const socket = new EventEmitter();
    const a = request(socket, "60");
    const b = request(socket, "40");
    bodies.hold(a.req, a.reply, "p1", LIMIT);
    bodies.hold(b.req, b.reply, "p1", LIMIT);
    const c = request(socket, "1");
    expect(refusal(() => bodies.hold(c.req, c.reply, "p1", LIMIT))).toBe("unavailable");
    // Another project's share is its own.
    expect(refusal(() => bodies.hold(c.req, c.reply, "p2", LIMIT))).toBeNull();
    expect(bodies.bytes).toBe(101);
    a.answered();
    a.answered();
    expect(bodies.bytes).toBe(41);
    expect(refusal(() => bodies.hold(request(socket, "50").req, c.reply, "p1", LIMIT))).toBeNull();
  });

  it("lets a project's first body in whatever its size within the limit, never over it", () => {
    const bodies = createBodiesInFlight(100);
    const socket = new EventEmitter();
    const big = request(socket, "900");
    bodies.hold(big.req, big.reply, "p1", LIMIT);
    expect(bodies.bytes).toBe(900);
    const huge = request(socket, "18446744073709551615");
    expect(refusal(() => bodies.hold(huge.req, huge.reply, "p2", LIMIT))).toBe("payload_too_large");
    expect(bodies.bytes).toBe(900);
  });

  it("gives back a body whose answer never closes once its connection does, and only once", () => {
    const bodies = createBodiesInFlight(100);
    const socket = new EventEmitter();
    const first = request(socket, "10");
    const queued = request(socket, "20");
    bodies.hold(first.req, first.reply, "p1", LIMIT);
    bodies.hold(queued.req, queued.reply, "p1", LIMIT);
    first.answered();
    // The client goes away: the queued answer will never be sent.
    socket.emit("close");
    expect(bodies.bytes).toBe(0);
    expect(bodies.projects).toBe(0);
    queued.answered();
    expect(bodies.bytes).toBe(0);
    // One listener per socket, however many bodies it held.
    expect(socket.listenerCount("close")).toBe(0);
  });
});

describe("declaredBytes", () => {
  it("is the Content-Length, the body limit for chunks, and nothing without a body", () => {
    expect(declaredBytes({ "content-length": "512" }, 1_000)).toBe(512);
    expect(declaredBytes({ "transfer-encoding": "chunked" }, 1_000)).toBe(1_000);
    expect(declaredBytes({}, 1_000)).toBe(0);
  });
});
