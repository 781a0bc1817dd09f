import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { HttpError } from "../../http/errors.js";
import { KEY_STORE_PREFIX } from "../../keys/key-store.js";
import type { RedisClient } from "../../redis/connections.js";

// `Idempotency-Key` on the control plane's POSTs. The first request with a key takes its record
// (SET NX, "pending"); its answer is stored there for 24 h. The same key again, from the same
// credential, with the same method, path and body, replays that answer (`Idempotent-Replayed:
// true`); with anything else it is a 422. A retry that arrives while the first is still being
// answered waits for it (polling its record, up to a bound), so concurrent retries get one result.
// Records are per credential (the key id): one tenant's keys never meet another's.
//
// An answer may hold a secret (a created key, a rule's signing secret), and Redis must never
// hold one in the clear: the stored answer is encrypted (AES-256-GCM) with a key derived from the
// caller's own bearer secret and the Idempotency-Key, neither of which Redis holds. A replay
// needs the same secret; after a rotation the old secret's records are unreadable to the new
// one, which is then answered 422 like any other mismatch.

export const IDEMPOTENCY_TTL_S = 86_400;
/**
 * A pending record's own life: a process that dies mid-request leaves one behind, and the key
 * must not answer 409 for a day. Past it, a retry runs again.
 */
const PENDING_TTL_S = 120;
/** How long a retry waits for the first request's answer before a 409. */
const WAIT_MS = 10_000;
const POLL_MS = 25;
const KEY_TEXT = /^[\x21-\x7e]{1,255}$/;
/**
 * The records one credential may make in a day, and the largest refusal kept: a tenant's key
 * sending new Idempotency-Keys with big refused bodies would otherwise fill the deployment's Redis.
 * A refusal over the bound frees its key instead: the retry runs, and is refused the same way.
 */
export const MAX_RECORDS_PER_CREDENTIAL = 10_000;
export const MAX_REFUSAL_BYTES = 4_096;

interface Pending {
  state: "pending";
  fp: string;
}
interface Done {
  state: "done";
  fp: string;
  status: number;
  iv: string;
  tag: string;
  data: string;
}
type IdemRecord = Pending | Done;

export interface Answer {
  status: number;
  body: unknown;
}

const sha256 = (text: string) => createHash("sha256").update(text).digest();

/** A request that may carry an Idempotency-Key, and how to answer it the first time. */
export interface IdempotentRequest {
  /** The Idempotency-Key header; undefined: no idempotency, `run` runs. */
  header: string | string[] | undefined;
  credentialId: string;
  /** The bearer secret, from which the answer's encryption key is derived (never stored). */
  credentialSecret: string;
  request: { method: string; url: string; body: unknown };
  run: () => Promise<Answer>;
}

/** Runs a request once per (credential, Idempotency-Key); `replayed` says it ran before. */
export type Idempotent = (req: IdempotentRequest) => Promise<Answer & { replayed: boolean }>;

/** Where the records live: what idempotency needs of Redis, and no more. */
export interface IdempotencyRecords {
  /** Takes `key` if nobody holds it (SET NX EX): true when taken. */
  take(key: string, value: string, ttlS: number): Promise<boolean>;
  get(key: string): Promise<string | null>;
  put(key: string, value: string, ttlS: number): Promise<void>;
  free(key: string): Promise<void>;
  /** One more in `counter`, whose life (`ttlS`) starts at its first count: the count now. */
  count(counter: string, ttlS: number): Promise<number>;
  /** Seconds `counter` lives on. */
  ttl(counter: string): Promise<number>;
}

export function redisIdempotencyRecords(redis: RedisClient): IdempotencyRecords {
  return {
    take: async (key, value, ttlS) => (await redis.set(key, value, "EX", ttlS, "NX")) !== null,
    get: (key) => redis.get(key),
    put: async (key, value, ttlS) => {
      await redis.set(key, value, "EX", ttlS);
    },
    free: async (key) => {
      await redis.del(key);
    },
    count: async (counter, ttlS) => {
      const [[, made]] = (await redis.multi().incr(counter).expire(counter, ttlS, "NX").exec()) as [
        [Error | null, number],
      ];
      return made;
    },
    ttl: (counter) => redis.ttl(counter),
  };
}

export function createIdempotency(
  redis: RedisClient | IdempotencyRecords,
  opts: { waitMs?: number; maxRecords?: number } = {},
): Idempotent {
  const records = "take" in redis ? redis : redisIdempotencyRecords(redis);
  const waitMs = opts.waitMs ?? WAIT_MS;
  const maxRecords = opts.maxRecords ?? MAX_RECORDS_PER_CREDENTIAL;

  function seal(secret: Buffer, answer: Answer) {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", secret, iv);
    const data = Buffer.concat([cipher.update(JSON.stringify(answer), "utf8"), cipher.final()]);
    return {
      iv: iv.toString("base64"),
      tag: cipher.getAuthTag().toString("base64"),
      data: data.toString("base64"),
    };
  }

  function open(secret: Buffer, r: Done): Answer | null {
    try {
      const decipher = createDecipheriv("aes-256-gcm", secret, Buffer.from(r.iv, "base64"));
      decipher.setAuthTag(Buffer.from(r.tag, "base64"));
      const text = Buffer.concat([
        decipher.update(Buffer.from(r.data, "base64")),
        decipher.final(),
      ]).toString("utf8");
      return JSON.parse(text) as Answer;
    } catch {
      return null;
    }
  }

  const parse = (text: string | null): IdemRecord | null => {
    if (text === null) return null;
    try {
      return JSON.parse(text) as IdemRecord;
    } catch {
      return null;
    }
  };

  const reused = () =>
    new HttpError(
      "idempotency_key_reused",
      "this Idempotency-Key was used with another request (method, path or body); use a new key",
    );

  /**
   * Runs `run` once per (credential, Idempotency-Key): its answer, or the first one's replayed.
   * `replayed` tells which. An HttpError under 500 is an answer too (stored and replayed) when it
   * is at most MAX_REFUSAL_BYTES; any other failure frees the key, so that a retry runs again.
   */
  return async function idempotent(
    opts: IdempotentRequest,
  ): Promise<Answer & { replayed: boolean }> {
    if (opts.header === undefined) return { ...(await opts.run()), replayed: false };
    const header = Array.isArray(opts.header) ? undefined : opts.header;
    if (header === undefined || !KEY_TEXT.test(header)) {
      throw new HttpError(
        "invalid_request",
        "Idempotency-Key: one header of 1-255 visible ASCII characters",
      );
    }
    const id = sha256(header).toString("hex");
    const key = `${KEY_STORE_PREFIX}:idempotency:${opts.credentialId}:${id}`;
    const fp = sha256(
      `${opts.request.method} ${opts.request.url}\n${JSON.stringify(opts.request.body ?? null)}`,
    ).toString("hex");
    const secret = sha256(`headroom-idempotency\0${opts.credentialSecret}\0${header}`);

    const taken = await records.take(
      key,
      JSON.stringify({ state: "pending", fp } satisfies Pending),
      PENDING_TTL_S,
    );
    if (taken) await count(opts.credentialId, key);
    if (!taken) {
      const deadline = Date.now() + waitMs;
      for (;;) {
        const r = parse(await records.get(key));
        if (r === null) break; // freed by a failure: this request runs it
        if (r.fp !== fp) throw reused();
        if (r.state === "done") {
          const answer = open(secret, r);
          if (!answer) throw reused();
          return { ...answer, replayed: true };
        }
        if (Date.now() + POLL_MS > deadline) {
          throw new HttpError(
            "idempotency_in_progress",
            "a request with this Idempotency-Key is still being answered; retry later",
            { headers: { "retry-after": 1 } },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
      // The first request failed and freed the key: take it now, or follow whoever did.
      return idempotent(opts);
    }

    let answer: Answer;
    try {
      answer = await opts.run();
    } catch (err) {
      const refusal = err instanceof HttpError && err.status < 500 ? err.toBody() : null;
      if (refusal !== null && JSON.stringify(refusal).length <= MAX_REFUSAL_BYTES) {
        answer = { status: (err as HttpError).status, body: refusal };
        await store(key, fp, secret, answer);
      } else {
        await records.free(key).catch(() => undefined);
      }
      throw err;
    }
    await store(key, fp, secret, answer);
    return { ...answer, replayed: false };
  };

  /** Counts a new record against its credential's day; past the bound, the record is let go. */
  async function count(credentialId: string, key: string) {
    const counter = `${KEY_STORE_PREFIX}:idempotency-count:${credentialId}`;
    const made = await records.count(counter, IDEMPOTENCY_TTL_S);
    if (made <= maxRecords) return;
    await records.free(key);
    throw new HttpError(
      "rate_limited",
      `this key made ${maxRecords} Idempotency-Key records in 24 h; retry later, or send the request without one`,
      { headers: { "retry-after": Math.max(1, await records.ttl(counter)) } },
    );
  }

  async function store(key: string, fp: string, secret: Buffer, answer: Answer) {
    const done: Done = { state: "done", fp, status: answer.status, ...seal(secret, answer) };
    await records.put(key, JSON.stringify(done), IDEMPOTENCY_TTL_S);
  }
}
