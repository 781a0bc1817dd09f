import { randomFillSync } from "node:crypto";

// Report ids: UUIDv7 (RFC 9562: 48 bits of Unix ms, so ClickHouse sorts them well, then 74 random
// bits). The random bytes come from a pool filled 1,024 ids at a time: one getrandom call per id
// was about 5% of the edge's CPU. A batch's ids are written as ASCII into one buffer and read back
// as one string, of which each id is a slice: one small string per id, not dozens of pieces.

/**
 * Any UUID as text (8-4-4-4-12 hex digits, either case), whatever its version bits: what the edge
 * takes as a client's id and ClickHouse's UUID holds. The ids made here are UUIDv7.
 */
// Both cases spelled out, not /i: the OpenAPI document's pattern keeps no flags.
export const UUID_TEXT =
  /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

const ID_LENGTH = 36;
const RANDOM_BYTES = 10;
const POOL_IDS = 1024;
const pool = new Uint8Array(RANDOM_BYTES * POOL_IDS);
let next = POOL_IDS;

/** ASCII codes of the two hex digits of each byte value. */
const HEX = new Uint8Array(512);
for (let b = 0; b < 256; b++) {
  HEX[2 * b] = "0123456789abcdef".charCodeAt(b >> 4);
  HEX[2 * b + 1] = "0123456789abcdef".charCodeAt(b & 15);
}
const DASH = 45;

let text = Buffer.alloc(ID_LENGTH * 128);

/** `count` UUIDv7 ids stamped with `ms`, all distinct but for a 2^-74 chance per pair. */
export function newReportIds(count: number, ms: number = Date.now()): string[] {
  if (text.length < ID_LENGTH * count) text = Buffer.alloc(ID_LENGTH * count);
  // 48-bit big-endian ms: the ids' first 12 hex digits, the same for all of them.
  const time = [
    (ms / 0x10000000000) & 0xff,
    (ms / 0x100000000) & 0xff,
    (ms / 0x1000000) & 0xff,
    (ms / 0x10000) & 0xff,
    (ms / 0x100) & 0xff,
    ms & 0xff,
  ];
  for (let i = 0; i < count; i++) {
    if (next === POOL_IDS) {
      randomFillSync(pool);
      next = 0;
    }
    const r = RANDOM_BYTES * next++;
    let at = ID_LENGTH * i;
    for (let k = 0; k < 6; k++) {
      if (k === 4) text[at++] = DASH;
      at = hex(time[k] as number, at);
    }
    text[at++] = DASH;
    // Version 7 in the high nibble of byte 6, variant 0b10 in the two high bits of byte 8.
    at = hex(0x70 | ((pool[r] as number) & 0x0f), at);
    at = hex(pool[r + 1] as number, at);
    text[at++] = DASH;
    at = hex(0x80 | ((pool[r + 2] as number) & 0x3f), at);
    at = hex(pool[r + 3] as number, at);
    text[at++] = DASH;
    for (let k = 4; k < RANDOM_BYTES; k++) at = hex(pool[r + k] as number, at);
  }
  const all = text.toString("latin1", 0, ID_LENGTH * count);
  const ids = new Array<string>(count);
  for (let i = 0; i < count; i++) ids[i] = all.slice(ID_LENGTH * i, ID_LENGTH * (i + 1));
  return ids;
}

function hex(byte: number, at: number): number {
  text[at] = HEX[2 * byte] as number;
  text[at + 1] = HEX[2 * byte + 1] as number;
  return at + 2;
}

export function newReportId(): string {
  return newReportIds(1)[0] as string;
}
