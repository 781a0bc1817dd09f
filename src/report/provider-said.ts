import { isRateLimitHeader } from "../providers/keep-headers.js";

// What the provider said, as a report may carry it (docs/report-api.md): `headers`, the provider
// response's headers, and `error`, its JSON error body. Both are read at the edge, before the
// report is queued, into the compact JSON text the record stores (or null):
//
// - headers: only the allowlisted rate-limit headers are kept (isRateLimitHeader); every other
//   header is dropped here, and never named in a warning, a log line or a stored byte. The kept
//   ones are bounded (count, name and value length); what is over a bound is dropped with a
//   warning, never a refused report (CONTRACT.md, "fire-and-forget").
// - error: any JSON value, bounded in depth and size; one over a bound is stored as null with a
//   warning.

/** At most this many rate-limit headers are kept. */
export const MAX_KEPT_HEADERS = 64;
/** A kept header's name is at most this long. */
export const MAX_HEADER_NAME = 128;
/** A kept header's value is at most this long (joined values of one name count as one). */
export const MAX_HEADER_VALUE = 512;
/** The deepest error body stored: objects and arrays nested in one another. */
export const MAX_ERROR_DEPTH = 16;
/** The largest error body stored, as compact JSON, in UTF-16 units (bounds its UTF-8 bytes ×3). */
export const MAX_ERROR_LENGTH = 16_384;

export interface SaidWarning {
  path: string;
  message: string;
}

export interface ProviderSaid {
  /** Kept headers as compact JSON text (`{"name":"value",…}`, lowercase names), or null. */
  headers: string | null;
  /** The error body as compact JSON text, or null. */
  error: string | null;
  /**
   * The same two as values (what JSON.parse of the texts gives), so that the edge derives the
   * windows' warnings without parsing again what it has just written.
   */
  values: { headers: Record<string, string> | null; error: unknown };
  warnings: SaidWarning[];
}

const NONE: ProviderSaid = Object.freeze({
  headers: null,
  error: null,
  values: Object.freeze({ headers: null, error: null }),
  warnings: [],
});

/** Whether a report body carries either field (most do not: the contract's client sends none). */
export const carriesProviderSaid = (body: object): boolean =>
  (body as { headers?: unknown }).headers != null || (body as { error?: unknown }).error != null;

/** The `headers` and `error` of a report body (a parsed JSON value), kept and bounded. */
export function readProviderSaid(body: unknown): ProviderSaid {
  if (body === null || typeof body !== "object" || !carriesProviderSaid(body)) return NONE;
  const warnings: SaidWarning[] = [];
  const { headers, error } = body as { headers?: unknown; error?: unknown };
  const kept = headers == null ? null : keptHeaders(headers, warnings);
  const errorText = error == null ? null : boundedError(error, warnings);
  return {
    headers: kept === null ? null : JSON.stringify(kept),
    error: errorText,
    // The body came from JSON: its error value is what parsing errorText gives back.
    values: { headers: kept, error: errorText === null ? null : error },
    warnings,
  };
}

/**
 * The sent headers (an object of name → value, or an array of [name, value] pairs) → the kept
 * ones (null: none). Names are case-insensitive: the same name sent twice (in two casings, or
 * twice in pairs) is one header whose values are joined with ", " (RFC 9110 §5.3).
 */
function keptHeaders(sent: unknown, warnings: SaidWarning[]): Record<string, string> | null {
  const pairs = headerPairs(sent);
  if (pairs === null) {
    warnings.push({
      path: "headers",
      message:
        "expected an object of header names to string values, or an array of [name, value] pairs: stored as null",
    });
    return null;
  }
  // Names are lowercased before the allowlist sees them, so only allowlisted names are joined.
  const joined: Record<string, string> = Object.create(null);
  let badValues = 0;
  for (const [name, value] of pairs) {
    if (typeof value !== "string" && typeof value !== "number") {
      badValues++;
      continue;
    }
    const lower = name.toLowerCase();
    const text = String(value);
    joined[lower] = lower in joined ? `${joined[lower]}, ${text}` : text;
  }
  const out: Record<string, string> = {};
  let count = 0;
  let tooLong = 0;
  let tooMany = 0;
  for (const [name, value] of Object.entries(joined)) {
    if (!isRateLimitHeader(name)) continue;
    if (name.length > MAX_HEADER_NAME || value.length > MAX_HEADER_VALUE || !value.isWellFormed()) {
      tooLong++;
      continue;
    }
    if (count === MAX_KEPT_HEADERS) {
      tooMany++;
      continue;
    }
    out[name] = value;
    count++;
  }
  // Counts only: a dropped header's name is not repeated back, so no warning can carry one.
  if (badValues > 0)
    warnings.push({
      path: "headers",
      message: `${badValues} header value(s) not a string: dropped`,
    });
  if (tooLong > 0)
    warnings.push({
      path: "headers",
      message: `${tooLong} rate-limit header(s) with a name over ${MAX_HEADER_NAME} or a value over ${MAX_HEADER_VALUE} characters: dropped`,
    });
  if (tooMany > 0)
    warnings.push({
      path: "headers",
      message: `more than ${MAX_KEPT_HEADERS} rate-limit headers: ${tooMany} dropped`,
    });
  return count === 0 ? null : out;
}

function headerPairs(sent: unknown): [string, unknown][] | null {
  if (Array.isArray(sent)) {
    const pairs: [string, unknown][] = [];
    for (const p of sent) {
      if (!Array.isArray(p) || p.length !== 2 || typeof p[0] !== "string") return null;
      pairs.push([p[0], p[1]]);
    }
    return pairs;
  }
  if (typeof sent === "object" && sent !== null) return Object.entries(sent);
  return null;
}

/** The error body as compact JSON, or null (with a warning) when it is too deep or too big. */
function boundedError(sent: unknown, warnings: SaidWarning[]): string | null {
  if (deeperThan(sent, MAX_ERROR_DEPTH)) {
    warnings.push({
      path: "error",
      message: `nested deeper than ${MAX_ERROR_DEPTH} levels: stored as null`,
    });
    return null;
  }
  const text = JSON.stringify(sent);
  if (text.length > MAX_ERROR_LENGTH) {
    warnings.push({
      path: "error",
      message: `over ${MAX_ERROR_LENGTH} characters as JSON: stored as null`,
    });
    return null;
  }
  return text;
}

function deeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== "object") return false;
  if (max <= 0) return true;
  for (const v of Array.isArray(value) ? value : Object.values(value))
    if (deeperThan(v, max - 1)) return true;
  return false;
}
