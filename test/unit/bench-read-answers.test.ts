import { describe, expect, it } from "vitest";
import { answered, failedNote } from "../../bench/read-answers.js";

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
});
