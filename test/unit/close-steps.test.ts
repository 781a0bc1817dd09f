import { Writable } from "node:stream";
import { afterEach, expect, it, vi } from "vitest";
import { closeSteps } from "../../src/lib/close-steps.js";
import { createLogger } from "../../src/lib/logger.js";

function capture() {
  const lines: { step?: string; msg: string }[] = [];
  const out = new Writable({
    write(chunk, _, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { lines, logger: createLogger("info", "test", out) };
}

afterEach(() => {
  vi.useRealTimers();
});

it("names the step a shutdown still waits for after 5 s, and runs the steps in order", async () => {
  vi.useFakeTimers();
  const { lines, logger } = capture();
  const ran: string[] = [];
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const closing = closeSteps(logger, [
    ["first", () => ran.push("first")],
    ["queue", () => held.then(() => ran.push("queue"))],
    ["last", () => ran.push("last")],
  ]);
  await vi.advanceTimersByTimeAsync(4_999);
  expect(lines).toStrictEqual([]);
  await vi.advanceTimersByTimeAsync(1);
  expect(lines.map((l) => [l.step, l.msg])).toStrictEqual([
    ["queue", "shutdown: still waiting for a step"],
  ]);
  release();
  await closing;
  expect(ran).toStrictEqual(["first", "queue", "last"]);
  expect(lines).toHaveLength(1);
});

it("leaves a step with a give-up time behind after it, goes on, and logs the step's later failure", async () => {
  vi.useFakeTimers();
  const { lines, logger } = capture();
  const ran: string[] = [];
  let fail = (_: Error) => {};
  const hung = new Promise<void>((_, reject) => {
    fail = reject;
  });
  const closing = closeSteps(logger, [
    ["redis", () => hung, 2_000],
    ["after", () => ran.push("after")],
  ]);
  await vi.advanceTimersByTimeAsync(1_999);
  expect(ran).toStrictEqual([]);
  await vi.advanceTimersByTimeAsync(1);
  await closing;
  expect(ran).toStrictEqual(["after"]);
  fail(new Error("connection lost"));
  await vi.advanceTimersByTimeAsync(0);
  expect(lines.map((l) => [l.step, l.msg])).toStrictEqual([
    ["redis", "shutdown: gave up waiting for a step"],
    ["redis", "shutdown: a step left behind failed"],
  ]);
});

it("a step that fails stops the shutdown with its error", async () => {
  const { logger } = capture();
  const ran: string[] = [];
  await expect(
    closeSteps(logger, [
      ["bad", () => Promise.reject(new Error("refused"))],
      ["after", () => ran.push("after")],
    ]),
  ).rejects.toThrow("refused");
  expect(ran).toStrictEqual([]);
});
