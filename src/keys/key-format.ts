import { createHash, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";

// Keys issued here: a prefix + 27 base62 characters (≥ 160 random bits) + a 6-character base62
// CRC32 of everything before it, so a mistyped or made-up key is refused without a Redis call.
// The prefix tells the scope: `hr_` reports, `hrr_` reads, `hrm_` manages one project's keys and
// alert rules, `hra_` is an operator's (any project), so that a person or a secret scanner can
// tell them apart. Keys from elsewhere (e.g. `dlm_…` from the original hosted service) are
// imported as they are.

export const SCOPES = ["report", "read", "manage", "admin"] as const;
export type Scope = (typeof SCOPES)[number];
/** The data plane's keys: they report and read, and manage nothing. */
export const DATA_SCOPES = ["report", "read"] as const;
/** The control plane's keys (src/control/): they manage, and neither report nor read. */
export const MANAGEMENT_SCOPES = ["manage", "admin"] as const;

export const KEY_PREFIX: Record<Scope, string> = {
  report: "hr_",
  read: "hrr_",
  manage: "hrm_",
  admin: "hra_",
};

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LENGTH = 27;
const CHECK_LENGTH = 6;
const ISSUED = /^hr[rma]?_[0-9A-Za-z]{33}$/;
const ISSUED_PREFIX = /^hr[rma]?_/;
const IMPORTED = /^[A-Za-z0-9._~+/=-]{16,256}$/;

function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 × 62: rejecting the rest keeps every character equally likely.
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

function checksum(text: string): string {
  let n = crc32(text);
  let out = "";
  for (let i = 0; i < CHECK_LENGTH; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

export function generateKey(scope: Scope = "report"): string {
  const head = `${KEY_PREFIX[scope]}${randomBase62(BODY_LENGTH)}`;
  return head + checksum(head);
}

export function generateId(prefix: string): string {
  return `${prefix}_${randomBase62(16)}`;
}

/** True when the key could exist: right shape, and for issued keys the right checksum. */
export function isWellFormedKey(key: string): boolean {
  if (ISSUED_PREFIX.test(key)) {
    if (!ISSUED.test(key)) return false;
    const split = key.length - CHECK_LENGTH;
    return checksum(key.slice(0, split)) === key.slice(split);
  }
  return IMPORTED.test(key);
}

/** Only this hash is stored; the plaintext is shown once, at creation. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}
