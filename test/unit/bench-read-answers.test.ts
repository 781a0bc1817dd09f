import { describe, expect, it } from "vitest";
import { answered, failedNote, latencyText } from "../../bench/read-answers.js";

describe("bench read answers", () => {
  it("a 200, or a 304 to a revalidation, is an answer; anything else failed", () => {
    expect(answered("200")).toBe(true);
    expect(answered("304")).toBe(true);
    for (const s of ["400", "404", "429", "500", "503", "error", "4xx/5xx"]) {
      expect(answered(s), s).toBe(false);
    }
  });

  it("failedNote is null when every answer succeeded", () => {
    expect(failedNote({ "200": 120, "304": 30 })).toBeNull();
    expect(failedNote({})).toBeNull();
    expect(failedNote({ "200": 5, "400": 0 })).toBeNull();
  });

  it("failedNote says how many of the answers failed, and with what", () => {
    expect(failedNote({ "400": 17 })).toBe("17 of 17 answers were 400");
    expect(failedNote({ "200": 100, "503": 2 })).toBe("2 of 102 answers were 503");
    expect(failedNote({ "200": 117, "400": 2, error: 1 })).toBe(
      "3 of 120 answers failed (400: 2, error: 1)",
    );
  });

  it("latencyText never prints a failed endpoint's latency as a result", () => {
    const latencyMs = { p50: 12, p99: 40 };
    expect(latencyText({ statuses: { "200": 9, "304": 1 }, latencyMs })).toBe(
      "p50 12 ms, p99 40 ms",
    );
    expect(latencyText({ statuses: { "200": 9, "503": 1 }, latencyMs })).toBe(
      "p50 12 ms, p99 40 ms of the answers that succeeded, INVALID (1 of 10 answers were 503)",
    );
    expect(latencyText({ statuses: { "400": 17 }, latencyMs: { p50: 0, p99: 0 } })).toBe(
      "no answer succeeded, INVALID (17 of 17 answers were 400)",
    );
  });
});
