import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { newSecret, sign, signedHeaders, verify } from "../../src/alerts/signing.js";

// Standard Webhooks signatures. The vector is the reference library's own ("sign function
// works" in standard-webhooks libraries/javascript/src/webhook.test.ts).

const VECTOR = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

/** The reference algorithm, written out: base64(HMAC-SHA256(base64decode(key), id.ts.body)). */
function reference(secret: string, id: string, ts: number, body: string) {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64")}`;
}

describe("webhook signatures", () => {
  it("match the reference library's test vector", () => {
    const { secret, id, timestamp, body, signature } = VECTOR;
    expect(sign(secret, id, timestamp, body)).toBe(signature);
    // The prefix is optional for the key, as in the reference library.
    expect(sign(secret.slice(6), id, timestamp, body)).toBe(signature);
  });

  it("match the reference algorithm for fresh secrets and bodies", () => {
    for (let i = 0; i < 20; i++) {
      const secret = newSecret();
      const body = JSON.stringify({ type: "headroom.alert", data: { n: i, s: "é\u2028" } });
      expect(sign(secret, `evt_${i}`, 1_700_000_000 + i, body)).toBe(
        reference(secret, `evt_${i}`, 1_700_000_000 + i, body),
      );
    }
  });

  it("secrets are whsec_ and 32 random bytes", () => {
    const s = newSecret();
    expect(s).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(s.slice(6), "base64")).toHaveLength(32);
    expect(newSecret()).not.toBe(s);
  });

  it("headers carry id, timestamp in seconds and the signature; they verify", () => {
    const now = VECTOR.timestamp * 1000 + 999;
    const h = signedHeaders(VECTOR.secret, VECTOR.id, VECTOR.body, now);
    expect(h).toEqual({
      "webhook-id": VECTOR.id,
      "webhook-timestamp": String(VECTOR.timestamp),
      "webhook-signature": VECTOR.signature,
    });
    expect(verify(VECTOR.secret, h, VECTOR.body, { nowMs: now })).toBe(true);
  });

  it("verification refuses a changed body, another secret, an old timestamp", () => {
    const now = VECTOR.timestamp * 1000 + 600;
    const h = signedHeaders(VECTOR.secret, "evt_1", "{}", now);
    expect(verify(VECTOR.secret, h, "{} ", { nowMs: now })).toBe(false);
    expect(verify(newSecret(), h, "{}", { nowMs: now })).toBe(false);
    expect(verify(VECTOR.secret, h, "{}", { nowMs: now + 301_000 })).toBe(false);
    expect(verify(VECTOR.secret, { ...h, "webhook-id": "evt_2" }, "{}", { nowMs: now })).toBe(
      false,
    );
  });

  // Fixed clocks on both sides of a second's half: a timestamp rounded instead of truncated
  // differs from the signed one only in the second half, whatever the hour the suite runs.
  it.each([0, 499, 500, 999])(
    "verification accepts one good signature among several (signed at ms %i of a second)",
    (ms) => {
      const now = VECTOR.timestamp * 1000 + ms;
      const h = signedHeaders(VECTOR.secret, "evt_1", "{}", now);
      expect(h["webhook-timestamp"]).toBe(String(VECTOR.timestamp));
      const many = { ...h, "webhook-signature": `v1,AAAA ${h["webhook-signature"]} v2,BBBB` };
      expect(verify(VECTOR.secret, many, "{}", { nowMs: now })).toBe(true);
      // Checked a little later, as a receiver does: the header's second is what was signed.
      expect(verify(VECTOR.secret, many, "{}", { nowMs: now + 1_700 })).toBe(true);
    },
  );
});
