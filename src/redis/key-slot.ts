// The Redis Cluster slot of a key: CRC16 (XMODEM) of the key, or of its hash tag — the part
// between the first `{` and the next `}` when that is not empty — modulo 16384 (the Cluster
// specification, "Keys distribution model").

export const SLOTS = 16_384;

const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    table[i] = crc & 0xffff;
  }
  return table;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) ^ (TABLE[((crc >> 8) ^ byte) & 0xff] ?? 0)) & 0xffff;
  return crc;
}

/** The part of a key that decides its slot. */
export function hashTag(key: string): string {
  const open = key.indexOf("{");
  if (open === -1) return key;
  const close = key.indexOf("}", open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

export function keySlot(key: string): number {
  return crc16(Buffer.from(hashTag(key), "utf8")) % SLOTS;
}
