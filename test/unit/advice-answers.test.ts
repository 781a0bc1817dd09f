import { expect, it } from "vitest";
import {
  ADVICE_ANSWERS_PER_PROJECT,
  ADVICE_ANSWERS_TOTAL,
  createAdviceAnswers,
} from "../../src/api/advice-answers.js";
import type { HotSeries } from "../../src/headroom/hot-series.js";
import { keyOf, memoryOnCopy } from "../helpers/advice-memory.js";

// The advice answers kept (src/api/advice-answers.ts) are bounded per project and in all: a
// tenant asking many distinct things (every `tokens` value, models that do not exist) pushes out
// its own answers, never another project's, and never grows the memory past the bounds.

const T0 = Date.UTC(2031, 2, 3, 4, 5, 6, 0);
const copy = new Map<string, HotSeries>([
  [
    JSON.stringify(["openai", "gpt-4o", "chat"]),
    { ls: T0, p: {}, w: { "tokens@1m": [T0, "r1", "1000", "900", T0 + 30_000] } },
  ],
]);

it("keeps 64 answers a project and 4,096 in all", () => {
  expect(ADVICE_ANSWERS_PER_PROJECT).toBe(64);
  expect(ADVICE_ANSWERS_TOTAL).toBe(4_096);
});

it("keeps a hostile tenant's distinct asks within its own bound, and another tenant's answers", async () => {
  const answers = createAdviceAnswers();
  const { memory } = memoryOnCopy(() => copy, { staleAfterMs: 60_000, t: T0, answers });
  const ask = { provider: "openai", model: "gpt-4o", requests: 1, tokens: 10 };
  const theirs = await memory.answer(keyOf("victim"), ask);
  for (let i = 0; i < 2_000; i++) {
    await memory.answer(keyOf("hostile"), { ...ask, tokens: i });
    await memory.answer(keyOf("hostile"), { ...ask, model: `made-up-${i}` });
  }
  expect(answers.size("hostile")).toBe(64);
  expect(answers.size()).toBe(65);
  // The victim's answer was kept: asked again, the same bytes, not made again.
  expect(await memory.answer(keyOf("victim"), ask)).toBe(theirs);
  memory.close();
});

it("keeps 4,096 answers at most over many projects, the least recently asked dropped first", async () => {
  const answers = createAdviceAnswers();
  const { memory } = memoryOnCopy(() => copy, { staleAfterMs: 60_000, t: T0, answers });
  const ask = { provider: "openai", model: "gpt-4o", requests: 1, tokens: 10 };
  const first = await memory.answer(keyOf("p-first"), ask);
  for (let p = 0; p < 100; p++) {
    for (let i = 0; i < 50; i++) await memory.answer(keyOf(`p${p}`), { ...ask, tokens: i + 1 });
    // One project asked all along stays.
    expect(await memory.answer(keyOf("p-first"), ask)).toBe(first);
  }
  expect(answers.size()).toBe(4_096);
  expect(answers.size("p-first")).toBe(1);
  // The oldest projects' answers went first.
  expect(answers.size("p0")).toBe(0);
  expect(answers.size("p99")).toBe(50);
  memory.close();
});

it("forgets a project's answers at once, and counts them out", () => {
  const answers = createAdviceAnswers({ perProject: 2, total: 3 });
  const a = { body: Buffer.from("{}"), etag: '"x"', from: {}, second: 0 };
  answers.set("p", "1", a);
  answers.set("p", "2", a);
  answers.set("p", "3", a);
  expect(answers.size("p")).toBe(2);
  expect(answers.get("p", "1")).toBeUndefined();
  answers.set("q", "1", a);
  answers.set("r", "1", a);
  expect(answers.size()).toBe(3);
  answers.drop("q");
  expect(answers.size()).toBe(2);
  expect(answers.get("q", "1")).toBeUndefined();
});
