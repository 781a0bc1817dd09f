import { signedHeaders } from "./signing.js";

// One signed POST of an event's body. The answer's status decides: 2xx delivered, anything else
// (or no answer within the timeout) is a failure the queue retries.

export interface SendResult {
  ok: boolean;
  status: number | null;
  error?: string;
}

export async function sendWebhook(opts: {
  url: string;
  id: string;
  body: string;
  secret: string;
  timeoutMs: number;
}): Promise<SendResult> {
  try {
    const res = await fetch(opts.url, {
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
    // The body is not needed; reading it frees the connection for reuse.
    await res.arrayBuffer().catch(() => undefined);
    return { ok: res.status >= 200 && res.status < 300, status: res.status };
  } catch (err) {
    const cause = (err as Error & { cause?: Error }).cause;
    return { ok: false, status: null, error: cause?.message ?? (err as Error).message };
  }
}
