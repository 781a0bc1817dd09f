import { isResetDelay, RESET_OUT_OF_RANGE } from "../lib/time-bounds.js";
import { parserFor, parserId } from "./parsers/registry.js";
import { resetWithin } from "./reset-time.js";
import {
  type DerivedWindows,
  KNOWN_DIMENSIONS,
  MAX_WINDOWS,
  type Window,
  type WindowSource,
  type WindowWarning,
} from "./window.js";

// A report's windows, derived on the server. A report with headers or an error body gets its
// provider's parser (parsers/registry.ts); the contract's six limits fields and credits (which the
// client library fills from OpenAI-named headers) then fill only the dimensions no parsed window
// covers. A report with neither is read exactly as before: the legacy "limits@1" mapping.

/**
 * The contract's own figures as windows of unknown length: the legacy mapping. A reset the edge
 * would not take (a row stored before the bounds: src/lib/time-bounds.ts) is null with a warning.
 */
function legacyWindows(source: WindowSource, warnings: WindowWarning[]): Window[] {
  const { limits, credits, at } = source;
  const windows: Window[] = [];
  const resetAt = (ms: number | null, path: string) => {
    if (ms === null) return null;
    const reset = isResetDelay(ms) ? resetWithin(at + ms, at) : null;
    if (reset?.ok) return reset.resets_at;
    warnings.push({ path, message: `${RESET_OUT_OF_RANGE}: read as unknown` });
    return null;
  };
  if (limits.requests_limit !== null || limits.requests_remaining !== null)
    windows.push({
      dimension: "requests",
      window: null,
      limit: limits.requests_limit,
      remaining: limits.requests_remaining,
      resets_at: resetAt(limits.reset_requests_ms, "limits.reset_requests_ms"),
    });
  if (limits.tokens_limit !== null || limits.tokens_remaining !== null)
    windows.push({
      dimension: "tokens",
      window: null,
      limit: limits.tokens_limit,
      remaining: limits.tokens_remaining,
      resets_at: resetAt(limits.reset_tokens_ms, "limits.reset_tokens_ms"),
    });
  if (credits && (credits.credits_limit !== null || credits.credits_remaining !== null))
    windows.push({
      dimension: "credits",
      window: null,
      limit: credits.credits_limit,
      remaining: credits.credits_remaining,
      resets_at: null,
    });
  return windows;
}

export const LEGACY_PARSER = "limits@1";

export function deriveWindows(source: WindowSource): DerivedWindows {
  const warnings: WindowWarning[] = [];
  const hasHeaders =
    source.headers !== null &&
    typeof source.headers === "object" &&
    Object.keys(source.headers).length > 0;
  const hasError = source.error !== null && source.error !== undefined;
  if (!hasHeaders && !hasError)
    return { windows: legacyWindows(source, warnings), warnings, parser: LEGACY_PARSER };

  const parser = parserFor(source.provider);
  let windows: Window[] = [];
  try {
    const parsed = parser.parse(source);
    windows = parsed.windows;
    warnings.push(...parsed.warnings);
  } catch (err) {
    // Parsers are written never to throw; if one does, the report keeps its own figures.
    warnings.push({ path: "parser", message: `parser failed: ${String(err).slice(0, 200)}` });
  }
  const covered = new Set(windows.map((w) => w.dimension));
  for (const w of legacyWindows(source, warnings)) if (!covered.has(w.dimension)) windows.push(w);
  return { windows: bounded(windows, warnings), warnings, parser: parserId(parser) };
}

const KNOWN = new Set<string>(KNOWN_DIMENSIONS);

/**
 * At most MAX_WINDOWS windows, the contract's dimensions first, each group in the parser's order;
 * the rest dropped with one warning (a tenant names dimensions through header names: 32 new
 * ones per report would otherwise feed the windows' rollups and /usage's maps).
 */
function bounded(windows: Window[], warnings: WindowWarning[]): Window[] {
  if (windows.length <= MAX_WINDOWS) return windows;
  const ranked = [
    ...windows.filter((w) => KNOWN.has(w.dimension)),
    ...windows.filter((w) => !KNOWN.has(w.dimension)),
  ];
  const kept = new Set(ranked.slice(0, MAX_WINDOWS));
  const dropped = ranked.slice(MAX_WINDOWS);
  const names = dropped.slice(0, 3).map((w) => `${w.dimension}${w.window ? `@${w.window}` : ""}`);
  warnings.push({
    path: "windows",
    message: `${dropped.length} windows past the ${MAX_WINDOWS} a report may carry: dropped (${names.join(", ")}${dropped.length > 3 ? ", …" : ""})`,
  });
  return windows.filter((w) => kept.has(w));
}

/** The fields of a stored report that windows are derived from (a ReportRecord has them). */
export interface WindowRecord {
  provider: string;
  /** ISO 8601, the provider's answer time as the client reported it. */
  timestamp: string;
  requests_limit: number | null;
  requests_remaining: number | null;
  tokens_limit: number | null;
  tokens_remaining: number | null;
  reset_requests_ms: number | null;
  reset_tokens_ms: number | null;
  credits_limit: number | null;
  credits_remaining: number | null;
  /** Kept headers as compact JSON text, or null/absent. */
  headers?: string | null;
  /** The provider's error body as compact JSON text, or null/absent. */
  error?: string | null;
}

const parseJson = (text: string | null | undefined): unknown => {
  if (text == null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

/**
 * deriveWindows for a stored report. `values`: its headers and error already as values (the edge
 * has them), instead of parsing the record's texts.
 */
export function windowsOfRecord(
  record: WindowRecord,
  values?: { headers: Record<string, string> | null; error: unknown },
): DerivedWindows {
  const headers = values ? values.headers : parseJson(record.headers);
  return deriveWindows({
    provider: record.provider,
    at: Date.parse(record.timestamp),
    limits: {
      requests_limit: record.requests_limit,
      requests_remaining: record.requests_remaining,
      tokens_limit: record.tokens_limit,
      tokens_remaining: record.tokens_remaining,
      reset_requests_ms: record.reset_requests_ms,
      reset_tokens_ms: record.reset_tokens_ms,
    },
    credits:
      record.credits_limit === null && record.credits_remaining === null
        ? null
        : { credits_limit: record.credits_limit, credits_remaining: record.credits_remaining },
    headers:
      headers !== null && typeof headers === "object" ? (headers as Record<string, string>) : null,
    error: values ? values.error : parseJson(record.error),
  });
}
