import type { ParseResult, ProviderParser } from "../parser.js";
import { durationMs, resetAfter } from "../reset-time.js";
import type { Window, WindowLength, WindowWarning } from "../window.js";

// Gemini: https://ai.google.dev/gemini-api/docs/rate-limits — no rate-limit headers; a 429's body
// (google.rpc.Status) names what ran out:
//   {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
//     {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
//       {"quotaMetric": "…/generate_content_paid_tier_input_token_count",
//        "quotaId": "GenerateContentPaidTierInputTokensPerModelPerMinute", "quotaValue": "3000000"}]},
//     {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}
// Each violation is a window at 0 remaining: dimension and length from the quotaId (the dimension
// from the quotaMetric when the id names none), limit from quotaValue when sent (`learned`: the
// read side remembers it past the 429), reset = answer time + retryDelay (a protobuf duration).

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const DIMENSIONS: [RegExp, string][] = [
  [/InputTokens?/i, "input_tokens"],
  [/OutputTokens?/i, "output_tokens"],
  [/Tokens?/i, "tokens"],
  [/Requests?/i, "requests"],
];
/** The quota metric's last word names a dimension: …_input_token_count, …_requests. */
const METRIC_DIMENSIONS: [RegExp, string][] = [
  [/input_token/i, "input_tokens"],
  [/output_token/i, "output_tokens"],
  [/token/i, "tokens"],
  [/request/i, "requests"],
];
const LENGTHS: [RegExp, WindowLength][] = [
  [/PerSecond/i, "1s"],
  [/PerMinute/i, "1m"],
  [/PerHour/i, "1h"],
  [/PerDay/i, "1d"],
];

/** The google.rpc.Status in `error`: the body itself, its `error`, or the first of an array. */
function statusOf(error: unknown): { status: Json; path: string } | null {
  const body = Array.isArray(error) ? error[0] : error;
  const prefix = Array.isArray(error) ? "error[0]" : "error";
  if (!isObject(body)) return null;
  if (isObject(body.error)) return { status: body.error, path: `${prefix}.error` };
  return { status: body, path: prefix };
}

const typeOf = (d: unknown) => (isObject(d) && typeof d["@type"] === "string" ? d["@type"] : "");

/**
 * When a google.rpc.Status body says to retry (its RetryInfo.retryDelay, from `at`), Unix ms; null
 * when it says nothing usable (a warning names what could not be read).
 */
export function googleRetryAt(
  error: unknown,
  at: number,
  warnings: WindowWarning[] = [],
): number | null {
  const found = statusOf(error);
  if (found === null || !Array.isArray(found.status.details)) return null;
  let retryAt: number | null = null;
  found.status.details.forEach((d: unknown, i: number) => {
    if (!typeOf(d).endsWith("google.rpc.RetryInfo") || !isObject(d)) return;
    const delay = d.retryDelay;
    const ms = typeof delay === "string" ? durationMs(delay.trim()) : null;
    const path = `${found.path}.details[${i}].retryDelay`;
    if (ms === null || !Number.isFinite(at)) {
      warnings.push({ path, message: "not a duration" });
      return;
    }
    // Bounded as every reset is (reset-time.ts): a delay past a year is null with a warning.
    const reset = resetAfter(ms, at);
    if (reset.ok) retryAt = reset.resets_at;
    else warnings.push({ path, message: reset.message });
  });
  return retryAt;
}

function parseGemini(error: unknown, at: number): ParseResult {
  const windows: Window[] = [];
  const warnings: WindowWarning[] = [];
  const found = statusOf(error);
  if (found === null || !Array.isArray(found.status.details)) return { windows, warnings };
  const details: unknown[] = found.status.details;
  const resets_at = googleRetryAt(error, at, warnings);

  details.forEach((d, i) => {
    if (!typeOf(d).endsWith("google.rpc.QuotaFailure") || !isObject(d)) return;
    const violations = Array.isArray(d.violations) ? d.violations : [];
    violations.forEach((v: unknown, j: number) => {
      const path = `${found.path}.details[${i}].violations[${j}]`;
      const quotaId = isObject(v) && typeof v.quotaId === "string" ? v.quotaId : null;
      if (quotaId === null) {
        warnings.push({ path: `${path}.quotaId`, message: "no quotaId" });
        return;
      }
      // The id names the dimension; the metric ("…/generate_content_free_tier_input_token_count")
      // when the id does not.
      const metric = isObject(v) && typeof v.quotaMetric === "string" ? v.quotaMetric : "";
      const dimension =
        DIMENSIONS.find(([re]) => re.test(quotaId))?.[1] ??
        METRIC_DIMENSIONS.find(([re]) => re.test(metric))?.[1];
      if (dimension === undefined) {
        warnings.push({
          path: `${path}.quotaId`,
          message: `unknown quota ${quotaId.slice(0, 80)}`,
        });
        return;
      }
      const window = LENGTHS.find(([re]) => re.test(quotaId))?.[1] ?? null;
      let limit: number | null = null;
      const value = isObject(v) ? v.quotaValue : undefined;
      if (value !== undefined) {
        const n =
          typeof value === "string" && /^\d+$/.test(value.trim())
            ? Number(value)
            : typeof value === "number" && value >= 0
              ? value
              : Number.NaN;
        if (Number.isFinite(n)) limit = n;
        else warnings.push({ path: `${path}.quotaValue`, message: "not a number" });
      }
      if (windows.some((w) => w.dimension === dimension && w.window === window)) return;
      // The quota's value is the window's limit, learned from the 429: remembered past it.
      const win: Window = { dimension, window, limit, remaining: 0, resets_at };
      if (limit !== null) win.source = "learned";
      windows.push(win);
    });
  });
  return { windows, warnings };
}

/** Whether a window Gemini's parser stored is learned: its limit is a 429's quota value. */
export const geminiLearned = (w: { limit: number | null }) => w.limit !== null;

export const geminiParser: ProviderParser = {
  name: "gemini",
  // 2: a window with a quota value is `learned`; the metric names a dimension the id does not.
  version: 2,
  parse: (source) => parseGemini(source.error, source.at),
};
