import { randomFillSync } from "node:crypto";

// UUIDv7 (RFC 9562): 48-bit Unix ms, then a 12-bit counter seeded at random each millisecond so
// ids made in one process sort in creation order, then 62 random bits.

const pool = Buffer.alloc(4096);
let poolOffset = pool.length;
let lastMs = 0;
let counter = 0;

function randomBytes(n: number): Buffer {
  if (poolOffset + n > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const out = pool.subarray(poolOffset, poolOffset + n);
  poolOffset += n;
  return out;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

export function uuidv7(now = Date.now()): string {
  let ms = Math.max(now, lastMs);
  if (ms === lastMs) {
    counter += 1;
    if (counter > 0xfff) {
      ms += 1;
      counter = randomBytes(1)[0] ?? 0;
    }
  } else {
    counter = randomBytes(1)[0] ?? 0; // leave headroom for increments within the millisecond
  }
  lastMs = ms;
  const b = Buffer.allocUnsafe(16);
  b.writeUIntBE(ms, 0, 6);
  b[6] = 0x70 | (counter >> 8);
  b[7] = counter & 0xff;
  randomBytes(8).copy(b, 8);
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  let s = "";
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) s += "-";
    s += HEX[b[i] ?? 0];
  }
  return s;
}
