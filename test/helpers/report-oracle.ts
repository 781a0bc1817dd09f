// What the contract (docs/report-api.md) says the edge must answer to a body, written from the contract's
// table and independently of src/report: the expectation a property test holds the edge to.
// Where the contract is silent, the implementation's documented choices are taken as given and
// marked "(impl)".
import { NULL_LIMITS } from "../../fixtures/sample-reports.js";

export type Verdict =
  | { status: 200; report: ExpectedReport }
  | { status: 400; error: "invalid_json" | "invalid_report" }
  | { status: 413; error: "payload_too_large" };

/** The normalised report, as the queued row decodes (fromRow), minus the server's fields. */
export interface ExpectedReport {
  app: string;
  provider: string;
  model: string | null;
  /** UTC ms, or null for "the server's receive time". */
  timestamp: number | null;
  requests_limit: number | null;
  requests_remaining: number | null;
  tokens_limit: number | null;
  tokens_remaining: number | null;
  reset_requests_ms: number | null;
  reset_tokens_ms: number | null;
  credits_limit: number | null;
  credits_remaining: number | null;
  request_cost: number | null;
}

export const LIMIT_FIELDS = [
  "requests_limit",
  "requests_remaining",
  "tokens_limit",
  "tokens_remaining",
  "reset_requests_ms",
  "reset_tokens_ms",
] as const;
export const CREDIT_FIELDS = ["credits_limit", "credits_remaining", "request_cost"] as const;

/** No credit figures; as a credits object, stored as "no credits". */
export const NULL_CREDITS = {
  credits_limit: null,
  credits_remaining: null,
  request_cost: null,
} as const;

const TWO_63 = 2 ** 63;
/** (impl) The JSON of -2^63 is -9223372036854776000, which no Int64 column can take. */
const fitsInt64 = (n: number) => n > -TWO_63 && n < TWO_63;
/** (impl) Credits are Decimal(38, 12) written with toFixed(12), exact below 1e21. */
const CREDIT_BOUND = 1e21;
/** (impl) Junk nested deeper than this, anywhere, is refused. */
const MAX_DEPTH = 32;
/** `__proto__` and `constructor` per the contract; (impl) `prototype` too. */
const FORBIDDEN = new Set(["__proto__", "constructor", "prototype"]);

/** "chars" are Unicode characters (code points), not UTF-16 units: an emoji is one. */
const chars = (s: string) => [...s].length;

class Invalid extends Error {}
const invalid = (): never => {
  throw new Invalid();
};

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function wellFormedString(v: unknown): string {
  if (typeof v !== "string") return invalid();
  // A lone surrogate is not a Unicode string: it cannot be UTF-8.
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(v)) invalid();
  return v;
}

// An unusable optional value (out of range, too long, empty, a timestamp out of its window) is
// stored as null, or cut; a value of the wrong type makes the report invalid.

/** A number too large for a double (a 400-digit one) is ±Infinity once parsed: out of range. */
const overflowed = (v: unknown) => v === Number.POSITIVE_INFINITY || v === Number.NEGATIVE_INFINITY;

function limit(v: unknown): number | null {
  if (v === undefined || v === null || overflowed(v)) return null;
  if (typeof v !== "number" || !Number.isFinite(v)) return invalid();
  // "rounded to the nearest integer", halves up as Math.round; -0 travels as JSON, so 0.
  const n = Math.round(v) + 0;
  return fitsInt64(n) ? n : null;
}

function credit(v: unknown): number | null {
  if (v === undefined || v === null || overflowed(v)) return null;
  if (typeof v !== "number" || !Number.isFinite(v)) return invalid();
  if (Math.abs(v) >= CREDIT_BOUND) return null;
  // Twelve decimal places, as Decimal(38, 12) keeps them.
  return Number(v.toFixed(12));
}

/** A string over its limit (in characters) is cut there. */
function cut(s: string, max: number): string {
  return chars(s) <= max ? s : [...s].slice(0, max).join("");
}

const DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

/** The edges' RETENTION_DAYS in the tests (the config's default). */
const RETENTION_DAYS = 400;

/**
 * ISO 8601 date-time with Z or an offset, any fractional precision → UTC ms (truncated); out of
 * its window (before 2000, before the retention, more than 24 h ahead) is unusable.
 */
export function isoToMs(text: string, now: number): number {
  const m = TIMESTAMP.exec(text) ?? invalid();
  const [y, mo, d, h, mi, s] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  const leap = (y as number) % 4 === 0 && ((y as number) % 100 !== 0 || (y as number) % 400 === 0);
  const monthDays = mo === 2 && !leap ? 28 : (DAYS[(mo as number) - 1] ?? 0);
  if ((mo as number) < 1 || (d as number) < 1 || (d as number) > monthDays) invalid();
  if ((h as number) > 23 || (mi as number) > 59 || (s as number) > 59) invalid();
  const ms = Number(`${m[7] ?? ""}000`.slice(0, 3));
  let offsetMin = 0;
  if (!m[8]) {
    offsetMin = Number(m[10]) * 60 + Number(m[11] ?? 0);
    if (offsetMin > 18 * 60 || Number(m[11] ?? 0) > 59) invalid();
    if (m[9] === "-") offsetMin = -offsetMin;
  }
  const days = Math.floor(Date.UTC(y as number, (mo as number) - 1, d) / 86_400_000);
  const utc =
    days * 86_400_000 +
    (((h as number) * 60 + (mi as number)) * 60 + (s as number)) * 1000 +
    ms -
    offsetMin * 60_000;
  if (utc < Date.UTC(2000, 0, 1) || utc > now + 24 * 3_600_000) invalid();
  if (utc < now - RETENTION_DAYS * 86_400_000) invalid();
  return utc;
}

function tooDeepOrForbidden(root: unknown): boolean {
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number];
    if (typeof v !== "object" || v === null) continue;
    if (depth > MAX_DEPTH) return true;
    for (const [k, child] of Object.entries(v)) {
      if (FORBIDDEN.has(k)) return true;
      stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** The contract's answer to `text` (a JSON body as sent), at server time `now`. */
export function expectedVerdict(text: string, now: number, bodyLimit = 32 * 1024): Verdict {
  if (Buffer.byteLength(text) > bodyLimit) return { status: 413, error: "payload_too_large" };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { status: 400, error: "invalid_json" };
  }
  try {
    if (tooDeepOrForbidden(value) || !isObject(value)) invalid();
    const body = value as Record<string, unknown>;
    const provider = wellFormedString(body.provider).trim().toLowerCase();
    if (chars(provider) < 1 || chars(provider) > 64) invalid();
    if (!isObject(body.limits)) invalid();
    const limits = body.limits as Record<string, unknown>;
    let app = "default";
    if (body.app !== undefined && body.app !== null) {
      // Cut after trimming; what the cut leaves at its end is trimmed too.
      const trimmed = cut(wellFormedString(body.app).trim(), 128).trim();
      if (trimmed !== "") app = trimmed;
    }
    let model: string | null = null;
    if (body.model !== undefined && body.model !== null) {
      model = cut(wellFormedString(body.model), 256);
      if (model === "") model = null;
    }
    let timestamp: number | null = null;
    if (body.timestamp !== undefined && body.timestamp !== null) {
      const text = wellFormedString(body.timestamp);
      // Not a date, or out of its window: the server's receive time.
      try {
        timestamp = isoToMs(text, now);
      } catch (err) {
        if (!(err instanceof Invalid)) throw err;
      }
    }
    const report: ExpectedReport = {
      app,
      provider,
      model,
      timestamp,
      ...NULL_LIMITS,
      ...NULL_CREDITS,
    };
    for (const f of LIMIT_FIELDS) report[f] = limit(limits[f]);
    // A reset delay past a year either way (365 days, 31,536,000,000 ms: docs/report-api.md) is
    // no time: stored as null.
    for (const f of ["reset_requests_ms", "reset_tokens_ms"] as const) {
      const ms = report[f];
      if (ms !== null && Math.abs(ms) > 31_536_000_000) report[f] = null;
    }
    if (body.credits !== undefined && body.credits !== null) {
      if (!isObject(body.credits)) invalid();
      const credits = body.credits as Record<string, unknown>;
      const values = CREDIT_FIELDS.map((f) => {
        const v = credit(credits[f]);
        // A cost is never negative (a balance may be): a negative one is stored as null.
        return f === "request_cost" && v !== null && (credits[f] as number) < 0 ? null : v;
      });
      // A credits object whose three fields are all null is "no credits".
      CREDIT_FIELDS.forEach((f, i) => {
        report[f] = values[i] ?? null;
      });
    }
    return { status: 200, report };
  } catch (err) {
    if (err instanceof Invalid) return { status: 400, error: "invalid_report" };
    throw err;
  }
}
