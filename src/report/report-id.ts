import { randomFillSync } from "node:crypto";
import { v7 as uuidv7 } from "uuid";

// Report ids: UUIDv7 (time-ordered, so ClickHouse sorts them well). The random part comes from a
// pool filled 256 ids at a time: one getrandom call per id was about 5% of the edge's CPU.

const POOL_IDS = 256;
const pool = new Uint8Array(16 * POOL_IDS);
let next = POOL_IDS;

export function newReportId(): string {
  if (next === POOL_IDS) {
    randomFillSync(pool);
    next = 0;
  }
  const random = pool.subarray(16 * next, 16 * (next + 1));
  next += 1;
  return uuidv7({ random });
}
