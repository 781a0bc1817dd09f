import { isResetDelay } from "../lib/time-bounds.js";
import {
  CREDIT_FIELDS,
  CREDIT_LIMIT,
  INT64_LIMIT,
  LIMIT_FIELDS,
  MAX_FUTURE_MS,
  MAX_LENGTH,
  MAX_USAGE_TOKENS,
  MIN_TIMESTAMP_MS,
  POOL_LABEL,
  parseIsoTimestamp,
  type ReportBody,
} from "./report-schema.js";

// The body reportBodySchema makes of a report that has nothing to fix or refuse, read without
// zod, from the schema's own field lists and bounds: the hot path of every report. Anything else
// (a wrong type, a value out of range, a string over its length, a timestamp outside its window,
// an object that is not plain JSON) is null here and goes to the schema, which decides what it is
// and says why. Lengths are checked in UTF-16 units, which bound the code points zod counts, so
// a string this path takes is one the schema takes too.

type Limits = ReportBody["limits"];
type Credits = NonNullable<ReportBody["credits"]>;
type Usage = NonNullable<ReportBody["usage"]>;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && Object.getPrototypeOf(v) === Object.prototype;

/** What reportBodySchema would give for `value`, when it would give it unchanged; else null. */
export function plainReportBody(value: unknown): ReportBody | null {
  if (!isPlainObject(value)) return null;

  const sentProvider = value.provider;
  if (typeof sentProvider !== "string" || !sentProvider.isWellFormed()) return null;
  const provider = sentProvider.trim().toLowerCase();
  if (provider.length === 0 || provider.length > MAX_LENGTH.provider) return null;

  const sentApp = value.app;
  let app = "default";
  if (typeof sentApp === "string") {
    if (!sentApp.isWellFormed()) return null;
    const trimmed = sentApp.trim();
    if (trimmed.length > MAX_LENGTH.app) return null;
    if (trimmed.length > 0) app = trimmed;
  } else if (sentApp != null) return null;

  const model = value.model ?? null;
  if (
    model !== null &&
    (typeof model !== "string" ||
      model.length === 0 ||
      model.length > MAX_LENGTH.model ||
      !model.isWellFormed())
  )
    return null;

  const sentTimestamp = value.timestamp;
  let timestamp: number | null = null;
  if (typeof sentTimestamp === "string") {
    if (!sentTimestamp.isWellFormed()) return null;
    const ms = parseIsoTimestamp(sentTimestamp);
    if (ms === null || ms < MIN_TIMESTAMP_MS || ms > Date.now() + MAX_FUTURE_MS) return null;
    timestamp = ms;
  } else if (sentTimestamp != null) return null;

  const sentLimits = value.limits;
  if (!isPlainObject(sentLimits)) return null;
  const limits = readLimits(sentLimits, limitValue);
  // A reset past a year either way is the schema's to store as null (and say so).
  if (
    limits === null ||
    !resetTaken(limits.reset_requests_ms) ||
    !resetTaken(limits.reset_tokens_ms)
  )
    return null;

  const sentCredits = value.credits;
  let credits: Credits | null = null;
  if (sentCredits != null) {
    if (!isPlainObject(sentCredits)) return null;
    credits = readCredits(sentCredits, creditValue);
    // A negative cost is the schema's to refuse (and say so).
    if (credits === null || (credits.request_cost ?? 0) < 0) return null;
  }

  const body: ReportBody = { provider, limits, app, model, timestamp, credits };
  const sentUsage = value.usage;
  if (sentUsage !== undefined) {
    if (sentUsage !== null && !isPlainObject(sentUsage)) return null;
    const usage = sentUsage === null ? null : readUsage(sentUsage, tokenCount);
    if (usage === null && sentUsage !== null) return null;
    body.usage = usage;
  }
  const sentPool = value.pool;
  if (sentPool === undefined) return body;
  if (sentPool !== null && (typeof sentPool !== "string" || !POOL_LABEL.test(sentPool)))
    return null;
  body.pool = sentPool;
  return body;
}

/** A token count as the schema gives it (null when absent); undefined when it is not a whole one in range. */
function tokenCount(sent: unknown): number | null | undefined {
  if (sent == null) return null;
  return typeof sent === "number" && Number.isInteger(sent) && sent >= 0 && sent <= MAX_USAGE_TOKENS
    ? sent
    : undefined;
}

/** A limit as the schema gives it (rounded, or null when absent); undefined when it is not one. */
function limitValue(sent: unknown): number | null | undefined {
  if (sent == null) return null;
  if (typeof sent !== "number") return undefined;
  const rounded = Math.round(sent);
  // False for NaN and ±Infinity too.
  return rounded > -INT64_LIMIT && rounded < INT64_LIMIT ? rounded : undefined;
}

const resetTaken = (ms: number | null) => ms === null || isResetDelay(ms);

/** A credit as the schema gives it (null when absent); undefined when it is not one. */
function creditValue(sent: unknown): number | null | undefined {
  if (sent == null) return null;
  return typeof sent === "number" && Math.abs(sent) < CREDIT_LIMIT ? sent : undefined;
}

type ReadFields<T> = (
  sent: Record<string, unknown>,
  value: (v: unknown) => number | null | undefined,
) => T | null;

/**
 * An object of `fields`, each read from `sent` by `value`, or null when one is not usable: one
 * object literal compiled from the schema's field list, so that every result has one shape
 * (report-schema.ts checks that the field names are plain identifiers).
 */
function compileReader<T>(fields: readonly string[]): ReadFields<T> {
  return new Function(
    "sent",
    "value",
    `${fields.map((f) => `const ${f} = value(sent.${f}); if (${f} === undefined) return null;`).join("\n")}
    return { ${fields.join(", ")} };`,
  ) as ReadFields<T>;
}

const readLimits = compileReader<Limits>(LIMIT_FIELDS);
const readCredits = compileReader<Credits>(CREDIT_FIELDS);
const readUsage = compileReader<Usage>(["input_tokens", "output_tokens", "cached_tokens"]);
