import { EventEmitter } from "node:events";
import type { FastifyReply, FastifyRequest } from "fastify";
import { describe, expect, it } from "vitest";
import { createTurnQueue, createWorkTurns, type TurnQueue } from "../../src/edge/work-turns.js";
import { HttpError } from "../../src/http/errors.js";

// The line of bodies waiting for their turn at work (EDGE_MAX_BYTES_AT_WORK): taken at once while
// they fit and nothing waits, else each project's in order and projects in turn; a body over the
// bound goes alone; a waiter that leaves gives its place to the next. And the turns of requests:
// a client gone at work keeps its bytes counted until its answer is made, one gone while waiting
// leaves the line, and a project's line is bounded.

const MAX = 100;

/** Enters `name` for `project`, recording the order of turns in `order`. */
function enter(q: TurnQueue, order: string[], project: string, bytes: number, name: string) {
  return q.enter(project, bytes, () => order.push(name));
}

describe("createTurnQueue", () => {
  it("takes bodies at once while they fit, then lines them up until bytes come back", () => {
    const q = createTurnQueue(MAX);
    const order: string[] = [];
    expect(enter(q, order, "a", 60, "a1")).toBeNull();
    expect(enter(q, order, "b", 40, "b1")).toBeNull();
    expect(q.bytes).toBe(100);
    expect(enter(q, order, "b", 1, "b2")).not.toBeNull();
    expect(q.waiting).toBe(1);
    q.give(60);
    expect(order).toStrictEqual(["b2"]);
    expect(q.bytes).toBe(41);
    expect(q.waiting).toBe(0);
  });

  it("grants projects in turn: a flood waits behind itself, another project goes next", () => {
    const q = createTurnQueue(MAX);
    const order: string[] = [];
    expect(enter(q, order, "a", 100, "a0")).toBeNull();
    for (let i = 1; i <= 3; i++) enter(q, order, "a", 100, `a${i}`);
    enter(q, order, "b", 100, "b1");
    enter(q, order, "c", 100, "c1");
    enter(q, order, "b", 100, "b2");
    for (let turn = 0; turn < 6; turn++) q.give(100);
    expect(order).toStrictEqual(["a1", "b1", "c1", "a2", "b2", "a3"]);
    expect(q.waiting).toBe(0);
  });

  it("lines a body up while others wait, even one that would fit", () => {
    const q = createTurnQueue(MAX);
    const order: string[] = [];
    enter(q, order, "a", 90, "a1");
    enter(q, order, "a", 50, "a2");
    // 10 bytes would fit beside a1, but a2 waits first: no smaller body passes a larger one.
    expect(enter(q, order, "b", 10, "b1")).not.toBeNull();
    q.give(90);
    expect(order).toStrictEqual(["a2", "b1"]);
    expect(q.bytes).toBe(60);
  });

  it("lets a body over the bound go alone, once nothing else is at work", () => {
    const q = createTurnQueue(MAX);
    const order: string[] = [];
    expect(enter(q, order, "a", 250, "big")).toBeNull();
    expect(enter(q, order, "b", 1, "small")).not.toBeNull();
    q.give(250);
    enter(q, order, "c", 1, "c1");
    // Taken at once: "small" has had its turn, so nothing waits and 1 + 1 fits.
    expect(order).toStrictEqual(["small"]);
    expect(q.bytes).toBe(2);
    const big = enter(q, order, "a", 250, "big2");
    expect(big).not.toBeNull();
    q.give(1);
    expect(order).toStrictEqual(["small"]);
    q.give(1);
    expect(order).toStrictEqual(["small", "big2"]);
    expect(q.bytes).toBe(250);
  });

  it("takes a waiter that leaves out of line, and gives its place to the next", () => {
    const q = createTurnQueue(MAX);
    const order: string[] = [];
    enter(q, order, "a", 90, "a1");
    const a2 = enter(q, order, "a", 50, "a2");
    enter(q, order, "b", 10, "b1");
    expect(q.waiting).toBe(2);
    q.leave(a2 as NonNullable<typeof a2>);
    // b1 fits beside a1 now that a2 does not stand before it.
    expect(order).toStrictEqual(["b1"]);
    expect(q.waiting).toBe(0);
    expect(q.bytes).toBe(100);
    // Leaving twice, or after the turn, changes nothing.
    q.leave(a2 as NonNullable<typeof a2>);
    expect(q.bytes).toBe(100);
    q.give(90);
    q.give(10);
    expect(q.bytes).toBe(0);
    expect(order).toStrictEqual(["b1"]);
  });
});

/** A request and its reply as createWorkTurns sees them: a socket and an answer that can close. */
function fakeRequest() {
  const socket = Object.assign(new EventEmitter(), { destroyed: false });
  const answer = new EventEmitter();
  const req = { raw: { socket } } as unknown as FastifyRequest;
  const reply = { raw: answer } as unknown as FastifyReply;
  const gone = () => {
    socket.destroyed = true;
    socket.emit("close");
    answer.emit("close");
  };
  return { req, reply, gone };
}

describe("createWorkTurns", () => {
  it("keeps a request's bytes at work after its client leaves, until its answer is made", async () => {
    const turns = createWorkTurns(MAX);
    const first = fakeRequest();
    expect(turns.take(first.req, first.reply, "a", 80)).toBeUndefined();
    const next = fakeRequest();
    const turn = turns.take(next.req, next.reply, "b", 80);
    first.gone();
    // Its parse and its write to Redis go on: its bytes are still at work.
    expect(turns.bytes).toBe(80);
    expect(turns.waiting).toBe(1);
    turns.end(first.req);
    expect(await turn).toBe(true);
    expect(turns.bytes).toBe(80);
    turns.end(next.req);
    turns.end(next.req);
    expect(turns.bytes).toBe(0);
  });

  it("takes a request out of line when its client leaves while it waits", async () => {
    const turns = createWorkTurns(MAX);
    const first = fakeRequest();
    turns.take(first.req, first.reply, "a", 80);
    const waiting = fakeRequest();
    const turn = turns.take(waiting.req, waiting.reply, "b", 80);
    waiting.gone();
    expect(await turn).toBe(false);
    expect(turns.waiting).toBe(0);
    turns.end(first.req);
    turns.end(waiting.req);
    expect(turns.bytes).toBe(0);
    // A request whose client is gone before it asks is never in line.
    const late = fakeRequest();
    late.gone();
    expect(await turns.take(late.req, late.reply, "a", 10)).toBe(false);
    expect(turns.bytes).toBe(0);
  });

  it("answers 503 past 1,024 requests of one project waiting; another project still lines up", () => {
    const turns = createWorkTurns(MAX);
    const first = fakeRequest();
    turns.take(first.req, first.reply, "a", MAX);
    for (let i = 0; i < 1_024; i++) {
      const r = fakeRequest();
      expect(turns.take(r.req, r.reply, "a", 1)).toBeInstanceOf(Promise);
    }
    const over = fakeRequest();
    let refusal: unknown;
    try {
      turns.take(over.req, over.reply, "a", 1);
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(HttpError);
    expect((refusal as HttpError).status).toBe(503);
    const other = fakeRequest();
    expect(turns.take(other.req, other.reply, "b", 1)).toBeInstanceOf(Promise);
    expect(turns.waiting).toBe(1_025);
  });
});
