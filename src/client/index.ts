// headroom/client (docs/pools.md): ask Headroom before a provider call whether it may spend what
// it asks now, and build a report from the provider's answer. No dependencies beyond `fetch`.
// An advice is kept for at most the answer's max-age (a second or less), its retry_after_ms
// counted down meanwhile; a failed ask is `unknown` (reason `unavailable`), never a throw, so
// that a caller may always go ahead on its own judgement.

export type Verdict = "go" | "wait" | "unknown";

export interface Advice {
  at: string;
  verdict: Verdict;
  reason: string | null;
  retry_after_ms: number | null;
  binding: { dimension: string; window: string | null; resets_at: string | null } | null;
  pool: { pool: string; kind: string; label: string | null; members: string[] } | null;
  windows: {
    dimension: string;
    window: string | null;
    limit: number | null;
    remaining: number | null;
    resets_at: string | null;
    room: boolean | null;
  }[];
  alternatives: {
    provider: string;
    model: string | null;
    pool: string;
    label: string | null;
    used_pct: number;
  }[];
}

export interface Ask {
  provider: string;
  model: string;
  /** Tokens the call may spend (prompt and completion). */
  tokens?: number;
  requests?: number;
  app?: string;
  /** A pool's id or label. */
  pool?: string;
}

export interface ClientOptions {
  /** The read API's base, e.g. http://127.0.0.1:3001 (without /api/v1). */
  baseUrl: string;
  /** A read key, or the project's report key. */
  key: string;
  fetch?: typeof fetch;
  now?: () => number;
  /** Answers kept at most (distinct asks). */
  maxCached?: number;
}

/** The most an answer is kept, whatever its max-age says. */
const MAX_AGE_MS = 1_000;

const maxAgeOf = (cacheControl: string | null): number => {
  const m = /max-age=(\d+)/.exec(cacheControl ?? "");
  return m ? Math.min(Number(m[1]) * 1000, MAX_AGE_MS) : 0;
};

export interface HeadroomClient {
  advise(ask: Ask): Promise<Advice>;
}

export function createHeadroomClient(opts: ClientOptions): HeadroomClient {
  const doFetch = opts.fetch ?? fetch;
  const now = opts.now ?? Date.now;
  const maxCached = opts.maxCached ?? 1_000;
  const cache = new Map<string, { until: number; fetchedAt: number; advice: Advice }>();
  const base = opts.baseUrl.replace(/\/+$/, "");

  return {
    async advise(ask) {
      const q = new URLSearchParams({ provider: ask.provider, model: ask.model });
      if (ask.tokens !== undefined) q.set("tokens", String(Math.max(0, Math.ceil(ask.tokens))));
      if (ask.requests !== undefined)
        q.set("requests", String(Math.max(0, Math.ceil(ask.requests))));
      if (ask.app !== undefined) q.set("app", ask.app);
      if (ask.pool !== undefined) q.set("pool", ask.pool);
      const url = `${base}/api/v1/advice?${q}`;
      const t = now();
      const held = cache.get(url);
      if (held && t < held.until) {
        const { advice } = held;
        // Counted down: right at the moment it is read, as the server's was at its own.
        const elapsed = t - held.fetchedAt;
        return advice.retry_after_ms === null
          ? advice
          : { ...advice, retry_after_ms: Math.max(0, advice.retry_after_ms - elapsed) };
      }
      try {
        const res = await doFetch(url, { headers: { authorization: `Bearer ${opts.key}` } });
        if (!res.ok) return unavailable(t, `status ${res.status}`);
        const advice = (await res.json()) as Advice;
        const maxAge = maxAgeOf(res.headers.get("cache-control"));
        if (maxAge > 0) {
          if (cache.size >= maxCached) cache.delete(cache.keys().next().value as string);
          cache.set(url, { until: t + maxAge, fetchedAt: t, advice });
        }
        return advice;
      } catch (err) {
        return unavailable(t, (err as Error).message);
      }
    },
  };
}

function unavailable(t: number, why: string): Advice {
  return {
    at: new Date(t).toISOString(),
    verdict: "unknown",
    reason: `unavailable: ${why}`.slice(0, 200),
    retry_after_ms: null,
    binding: null,
    pool: null,
    windows: [],
    alternatives: [],
  };
}

/** A report (docs/report-api.md) of a provider's answer: its headers, the server reads them. */
export interface Report {
  provider: string;
  model: string | null;
  app?: string;
  pool?: string;
  timestamp: string;
  limits: Record<string, never>;
  headers: [string, string][];
}

/**
 * The report of a provider's `fetch` response: every header goes (the edge keeps the rate-limit
 * ones and the account's keyed hash, and drops the rest), the limits are read on the server.
 */
export function reportFrom(
  response: { headers: { forEach(cb: (value: string, name: string) => void): void } },
  about: { provider: string; model: string | null; app?: string; pool?: string },
  at: number = Date.now(),
): Report {
  const headers: [string, string][] = [];
  response.headers.forEach((value, name) => {
    headers.push([name, value]);
  });
  return {
    provider: about.provider,
    model: about.model,
    ...(about.app === undefined ? {} : { app: about.app }),
    ...(about.pool === undefined ? {} : { pool: about.pool }),
    timestamp: new Date(at).toISOString(),
    limits: {},
    headers,
  };
}
