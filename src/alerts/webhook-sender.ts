import { DestinationRefusedError } from "./destination-policy.js";
import type { GuardedFetch } from "./guarded-fetch.js";
import { signedHeaders } from "./signing.js";

// One signed POST of an event's body. The answer's status decides: 2xx delivered, anything else
// (or no answer within the timeout) is a failure the queue retries.

export interface SendResult {
  ok: boolean;
  status: number | null;
  error?: string;
  /** The destination policy refused the address: retrying cannot help. */
  refused?: boolean;
}

/** A receiver's answer up to this much is read (and its connection kept); past it, cut off. */
const READ_AT_MOST = 64 * 1024;

/**
 * The answer's body is not needed: read to its end, a short one frees the connection for
 * reuse. A receiver's long or endless answer is cancelled, never held: buffered whole, one
 * receiver could fill the alerts worker's memory within the timeout.
 */
async function discard(res: Response) {
  const reader = res.body?.getReader();
  if (!reader) return;
  let read = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
      if (read > READ_AT_MOST) {
        await reader.cancel();
        return;
      }
    }
  } catch {
    // A body cut off or timed out: the status has already decided.
  }
}

export async function sendWebhook(opts: {
  url: string;
  id: string;
  body: string;
  secret: string;
  timeoutMs: number;
  /** Connects only where the destination policy allows (guarded-fetch.ts). */
  fetch: GuardedFetch["fetch"];
}): Promise<SendResult> {
  try {
    const res = await opts.fetch(opts.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "headroom-alerts",
        ...signedHeaders(opts.secret, opts.id, opts.body),
      },
      body: opts.body,
      redirect: "manual",
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    await discard(res);
    return { ok: res.status >= 200 && res.status < 300, status: res.status };
  } catch (err) {
    if (err instanceof DestinationRefusedError)
      return { ok: false, status: null, error: err.message, refused: true };
    const cause = (err as Error & { cause?: Error }).cause;
    return { ok: false, status: null, error: cause?.message ?? (err as Error).message };
  }
}
