import { brotliDecompressSync, gunzipSync } from "node:zlib";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  encodeAnswer,
  matchesEtag,
  negotiateEncoding,
  precompress,
} from "../../src/api/encoded-answer.js";
import { isoOf } from "../../src/api/time-range.js";

describe("negotiateEncoding", () => {
  it.each([
    [undefined, null],
    ["", null],
    ["identity", null],
    ["gzip, deflate", "gzip"],
    ["gzip, deflate, br", "br"],
    ["br;q=0.5, gzip", "gzip"],
    ["br;q=0, gzip;q=0.1", "gzip"],
    ["GZIP", "gzip"],
    ["x-gzip", "gzip"],
    ["*", "br"],
    ["*;q=0", null],
    ["gzip;q=0, br;q=0", null],
    ["deflate", null],
    [["gzip", "br"], "br"],
  ] as const)("%j → %s", (header, expected) => {
    expect(negotiateEncoding(header as string | string[] | undefined)).toBe(expected);
  });
});

describe("matchesEtag", () => {
  const tag = '"abc"';
  it.each([
    [undefined, false],
    ['"abc"', true],
    ['W/"abc"', true],
    ['"x", W/"abc"', true],
    ["*", true],
    ['"abcd"', false],
    ["abc", false],
    ['"ab"', false],
  ] as const)("%j → %s", (header, expected) => {
    expect(matchesEtag(header, tag)).toBe(expected);
  });
});

describe("encodeAnswer", () => {
  it("encodes an answer once, as its JSON, and tags it by project and bytes", () => {
    const answer = { points: [{ bucket: "2025-01-01T00:00:00.000Z", reports: 1 }] };
    const e = encodeAnswer(answer, "p1");
    expect(e.identity.toString()).toBe(JSON.stringify(answer));
    expect(encodeAnswer(answer, "p1")).toBe(e);
    // The same bytes in another project, or other bytes: other tags.
    const same = encodeAnswer(structuredClone(answer), "p2");
    expect(same.identity.equals(e.identity)).toBe(true);
    expect(same.etag).not.toBe(e.etag);
    expect(encodeAnswer({ points: [] }, "p1").etag).not.toBe(e.etag);
    expect(encodeAnswer(structuredClone(answer), "p1").etag).toBe(e.etag);
  });
});

describe("precompress", () => {
  it("compresses a large answer before it is published, and leaves a small one plain", async () => {
    const large = { points: Array.from({ length: 200 }, (_, i) => ({ bucket: i, reports: i })) };
    await precompress(encodeAnswer(large, "p1"), "br");
    const e = encodeAnswer(large, "p1");
    const br = await e.compressed.br;
    expect(br && brotliDecompressSync(br).equals(e.identity)).toBe(true);
    expect(e.compressed.gzip).toBeUndefined();
    const small = { points: [] };
    await precompress(encodeAnswer(small, "p1"), "br");
    expect(encodeAnswer(small, "p1").compressed).toEqual({});
  });

  it("compresses answers below and above 256 KiB (on the event loop, or on zlib's threads) to what decodes to them", async () => {
    for (const points of [10_000, 20_000]) {
      const answer = { points: Array.from({ length: points }, (_, i) => ({ bucket: i, n: i })) };
      const e = encodeAnswer(answer, "p1");
      expect(e.identity.length > 256 * 1024).toBe(points === 20_000);
      await precompress(e, "br");
      await precompress(e, "gzip");
      const [br, gz] = await Promise.all([e.compressed.br, e.compressed.gzip]);
      expect(br && brotliDecompressSync(br).equals(e.identity)).toBe(true);
      expect(gz && gunzipSync(gz).equals(e.identity)).toBe(true);
    }
  });
});

describe("isoOf", () => {
  it("gives what Date gives for ClickHouse's date-times and dates", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4_102_444_799_999 }), (ms) => {
        const iso = new Date(ms).toISOString();
        const seconds = `${iso.slice(0, 10)} ${iso.slice(11, 19)}`;
        expect(isoOf(seconds)).toBe(`${iso.slice(0, 19)}.000Z`);
        expect(isoOf(`${seconds}.${iso.slice(20, 23)}`)).toBe(iso);
        expect(isoOf(iso.slice(0, 10))).toBe(`${iso.slice(0, 10)}T00:00:00.000Z`);
      }),
    );
  });
});
