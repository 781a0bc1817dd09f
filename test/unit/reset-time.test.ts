import { describe, expect, it } from "vitest";
import {
  durationMs,
  EPOCH_MS_FROM,
  EPOCH_SECONDS_FROM,
  parseResetTime,
} from "../../src/providers/reset-time.js";

const AT = Date.parse("2026-01-01T00:00:00Z");
const resetsAt = (value: string) => {
  const r = parseResetTime(value, AT);
  return r.ok ? r.resets_at : null;
};

describe("reset times, in every format providers write them", () => {
  it("reads Go durations (OpenAI, Groq) as relative to the answer", () => {
    expect(resetsAt("6m0s")).toBe(AT + 360_000);
    expect(resetsAt("2m59.56s")).toBe(AT + 179_560);
    expect(resetsAt("1h2m3.5s")).toBe(AT + 3_723_500);
    expect(resetsAt("20ms")).toBe(AT + 20);
    expect(resetsAt("7.66s")).toBe(AT + 7660);
    expect(resetsAt("0s")).toBe(AT);
    expect(resetsAt("1500us")).toBe(AT + 2); // 1.5 ms, rounded to the ms
  });

  it("reads protobuf durations (Gemini's retryDelay)", () => {
    expect(resetsAt("37s")).toBe(AT + 37_000);
    expect(resetsAt("1.5s")).toBe(AT + 1500);
    expect(durationMs("37s")).toBe(37_000);
    expect(durationMs("junk")).toBeNull();
  });

  it("reads RFC 3339 timestamps (Anthropic) as absolute, with offsets and fractions", () => {
    expect(resetsAt("2025-08-21T12:40:59Z")).toBe(Date.UTC(2025, 7, 21, 12, 40, 59));
    expect(resetsAt("2025-08-21T14:40:59+02:00")).toBe(Date.UTC(2025, 7, 21, 12, 40, 59));
    expect(resetsAt("2025-08-21T12:40:59.250Z")).toBe(Date.UTC(2025, 7, 21, 12, 40, 59, 250));
  });

  it("tells epoch seconds, epoch ms and plain seconds apart by magnitude", () => {
    // Anthropic's unified reset: epoch seconds.
    expect(resetsAt("1782039600")).toBe(1_782_039_600_000);
    // OpenRouter's X-RateLimit-Reset: epoch ms.
    expect(resetsAt("1741305600000")).toBe(1_741_305_600_000);
    // Cerebras: plain seconds, fractional.
    expect(resetsAt("33011.382867097855")).toBe(AT + 33_011_383);
    expect(resetsAt("11.382867097854614")).toBe(AT + 11_383);
    expect(resetsAt("0")).toBe(AT);
    // The boundaries, as documented.
    // Plain seconds just below epoch seconds are 31 years away: past a year, no reset.
    expect(resetsAt(String(EPOCH_SECONDS_FROM - 1))).toBeNull();
    expect(resetsAt("31536000")).toBe(AT + 31_536_000_000);
    expect(resetsAt(String(EPOCH_SECONDS_FROM))).toBe(EPOCH_SECONDS_FROM * 1000);
    expect(resetsAt(String(EPOCH_MS_FROM))).toBe(EPOCH_MS_FROM);
  });

  it("takes no reset more than a year after the answer, nor one before 2000", () => {
    const year = 31_536_000_000;
    expect(resetsAt("31536001")).toBeNull();
    expect(resetsAt("8760h0m0.001s")).toBeNull();
    expect(resetsAt(String(AT + year))).toBe(AT + year);
    expect(resetsAt(String(AT + year + 1))).toBeNull();
    expect(resetsAt("9".repeat(300))).toBeNull();
    expect(resetsAt("Fri, 31 Dec 1999 23:59:59 GMT")).toBeNull();
    expect(resetsAt("2000-01-01T00:00:00Z")).toBe(Date.UTC(2000, 0, 1));
    expect(resetsAt("9999-12-31T23:59:59Z")).toBeNull();
    const r = parseResetTime("9".repeat(300), AT);
    expect(r.ok ? null : r.message).toMatch(/out of range/);
  });

  it("reads Retry-After's HTTP date", () => {
    expect(resetsAt("Wed, 21 Oct 2015 07:28:00 GMT")).toBe(Date.UTC(2015, 9, 21, 7, 28, 0));
  });

  it("refuses junk with a message, never throwing", () => {
    for (const junk of [
      "",
      "  ",
      "abc",
      "-1",
      "-5s",
      "1e400",
      "Infinity",
      "NaN",
      "6m0",
      "5 s",
      "2026-13-45T00:00:00Z",
      "99999999999999999999",
      "9".repeat(400),
    ]) {
      const r = parseResetTime(junk, AT);
      expect(r.ok, junk).toBe(false);
      if (!r.ok) expect(r.message.length).toBeGreaterThan(0);
    }
  });

  it("cannot count a relative reset from an unknown answer time, but still reads absolute ones", () => {
    expect(parseResetTime("6m0s", Number.NaN).ok).toBe(false);
    expect(parseResetTime("30", Number.NaN).ok).toBe(false);
    expect(parseResetTime("2025-08-21T12:40:59Z", Number.NaN).ok).toBe(true);
    expect(parseResetTime("1782039600", Number.NaN).ok).toBe(true);
  });
});
