import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

// Standard Webhooks signatures (standardwebhooks.com): the secret is `whsec_` + base64 of the
// key bytes; the signature is base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")), sent as
// `webhook-signature: v1,<signature>` beside `webhook-id` and `webhook-timestamp` (Unix seconds).

const PREFIX = "whsec_";
const KEY_BYTES = 32;

export function newSecret(): string {
  return PREFIX + randomBytes(KEY_BYTES).toString("base64");
}

function keyOf(secret: string): Buffer {
  const key = Buffer.from(
    secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret,
    "base64",
  );
  if (key.length === 0) throw new Error("empty webhook secret");
  return key;
}

export function sign(secret: string, id: string, timestampS: number, body: string): string {
  const mac = createHmac("sha256", keyOf(secret)).update(`${id}.${timestampS}.${body}`).digest();
  return `v1,${mac.toString("base64")}`;
}

export function signedHeaders(
  secret: string,
  id: string,
  body: string,
  nowMs = Date.now(),
): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": sign(secret, id, timestamp, body),
  };
}

export interface VerifyOptions {
  /** How far the timestamp may be from now (replay protection). */
  toleranceS?: number;
  nowMs?: number;
}

/**
 * What a receiver does: true when one of the space-separated `v1,` signatures matches and the
 * timestamp is recent. Used by tests and by anyone who wants a reference.
 */
export function verify(
  secret: string,
  headers: Record<string, string | string[] | undefined>,
  body: string,
  { toleranceS = 300, nowMs = Date.now() }: VerifyOptions = {},
): boolean {
  const one = (name: string) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const id = one("webhook-id");
  const ts = one("webhook-timestamp");
  const sigs = one("webhook-signature");
  if (!id || !ts || !sigs || !/^\d+$/.test(ts)) return false;
  if (Math.abs(nowMs / 1000 - Number(ts)) > toleranceS) return false;
  const expected = Buffer.from(sign(secret, id, Number(ts), body));
  return sigs.split(" ").some((s) => {
    const given = Buffer.from(s);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}
