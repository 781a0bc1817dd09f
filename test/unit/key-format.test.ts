import { describe, expect, it } from "vitest";
import { generateKey, hashKey, isWellFormedKey } from "../../src/keys/key-format.js";

describe("key format", () => {
  it("issues hr_ keys with at least 160 random bits and a valid checksum", () => {
    const key = generateKey();
    expect(key).toMatch(/^hr_[0-9A-Za-z]{33}$/);
    expect(isWellFormedKey(key)).toBe(true);
    expect(generateKey()).not.toBe(key);
  });

  it("issues read keys with a prefix of their own, checksummed like the others", () => {
    const key = generateKey("read");
    expect(key).toMatch(/^hrr_[0-9A-Za-z]{33}$/);
    expect(isWellFormedKey(key)).toBe(true);
    // A report key relabelled as a read key (or back) fails its checksum.
    expect(isWellFormedKey(`hrr_${generateKey().slice(3)}`)).toBe(false);
    expect(isWellFormedKey(`hr_${key.slice(4)}`)).toBe(false);
  });

  it("refuses a key with one character changed, without any lookup", () => {
    const key = generateKey();
    const i = 10;
    const typo = key.slice(0, i) + (key[i] === "a" ? "b" : "a") + key.slice(i + 1);
    expect(isWellFormedKey(typo)).toBe(false);
  });

  it("accepts imported keys of other formats and refuses junk", () => {
    expect(isWellFormedKey("dlm_Zm9vYmFyYmF6cXV4LXJhbmRvbS1ieXRlcw")).toBe(true);
    expect(isWellFormedKey("short")).toBe(false);
    expect(isWellFormedKey("has space in it ........")).toBe(false);
    expect(isWellFormedKey("ключ-ключ-ключ-ключ")).toBe(false);
  });

  it("hashes with SHA-256", () => {
    expect(hashKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});
