import { z } from "zod";
import { isResetDelay } from "../lib/time-bounds.js";
import { UUID_TEXT } from "./report-id.js";

// The one definition of a report: the wire rules of docs/report-api.md (`reportBodySchema`), the
// normalised record the server stores (`reportRecordSchema`), and the positional row that travels
// in queue jobs and is inserted into ClickHouse as JSONCompactEachRow (`toRow`/`fromRow`).

/** Limits must fit Int64: strictly between -2^63 and 2^63. */
export const INT64_LIMIT = 2 ** 63;
/** Credits are stored as Decimal(38, 12); toFixed(12) is exact text below 1e21. */
export const CREDIT_LIMIT = 1e21;
/** A timestamp lies between 2000-01-01 and this long after the server's clock. */
export const MIN_TIMESTAMP_MS = Date.UTC(2000, 0, 1);
export const MAX_FUTURE_MS = 24 * 60 * 60 * 1000;
/** The longest provider (after trimming), app (after trimming) and model, in characters. */
export const MAX_LENGTH = { provider: 64, app: 128, model: 256 } as const;

const wellFormed = (s: string) => s.isWellFormed();

/**
 * Marks a rule whose breach makes an optional value unusable rather than the report invalid: a
 * fire-and-forget client never reads a 400, so the value is stored as null instead (see
 * `unusableValue`). The length rules of `app` and `model` count as such too.
 */
const UNUSABLE = { unusable: true } as const;

/** Optional string fields: too long is cut at the limit, empty `model` is null. */
export const CUT_AT = { app: MAX_LENGTH.app, model: MAX_LENGTH.model } as const;

/**
 * What to store instead of an unusable optional value, given the issue zod raised about it:
 * `{ value }` to store, or null when the issue makes the report itself invalid (a wrong type, a
 * missing or unusable `provider`, `limits` not an object).
 */
export function unusableValue(issue: z.core.$ZodIssue, input: unknown): { value: unknown } | null {
  const [field] = issue.path;
  const marked = (issue as { params?: { unusable?: boolean } }).params?.unusable === true;
  if (marked) return { value: null };
  // A number past a double's range (a 400-digit limit) is ±Infinity once parsed: out of range,
  // as 1e300 is, not of the wrong type. (JSON has no Infinity literal: `Infinity` is no JSON.)
  if (
    issue.code === "invalid_type" &&
    overflowed(input) &&
    issue.path.length === 2 &&
    (field === "limits" || field === "credits")
  ) {
    return { value: null };
  }
  // A pool label that is no label (wrong type, too long, other characters) only loses the label.
  if (field === "pool" && issue.path.length === 1) return { value: null };
  if ((field === "app" || field === "model") && issue.path.length === 1) {
    if (issue.code === "too_small") return { value: null };
    if (issue.code === "too_big" && typeof input === "string")
      return { value: cutAt(field === "app" ? input.trim() : input, CUT_AT[field]) };
  }
  return null;
}

/** The first `max` characters (code points, as zod counts lengths) of `s`. */
function cutAt(s: string, max: number): string {
  return Array.from(s).slice(0, max).join("");
}
const NOT_UTF8 = "must be valid UTF-8 (no lone surrogates)";

/** ±Infinity: what JSON.parse makes of a number too large for a double. */
const overflowed = (v: unknown) => v === Number.POSITIVE_INFINITY || v === Number.NEGATIVE_INFINITY;

/** A number's type error, or for an overflowed number its range, as `unusableValue` stores it. */
const numberError = (range: string) => (issue: { input?: unknown }) =>
  overflowed(issue.input) ? range : "expected a number or null";

const INT64_MESSAGE = "must fit a signed 64-bit integer";
const CREDIT_MESSAGE = "must be below 1e21 in magnitude";

const limitValue = z
  .number({ error: numberError(INT64_MESSAGE) })
  .transform((n) => Math.round(n))
  // -2^63 itself is refused: its JSON text (-9223372036854776000) is past Int64's range, and
  // ClickHouse would store it wrapped round to +9223372036854775616.
  .refine((n) => n > -INT64_LIMIT && n < INT64_LIMIT, {
    message: INT64_MESSAGE,
    params: UNUSABLE,
  })
  .nullable()
  .optional()
  .transform((n) => n ?? null);

const RESET_MESSAGE = "must lie within a year (31536000000 ms) either way";

/**
 * A reset delay: an Int64 as the limits are, and within a year either way (src/lib/time-bounds.ts):
 * no provider states a longer one, and a time past it (9e15 ms) is no time a reader can write.
 */
const resetValue = z
  .number({ error: numberError(RESET_MESSAGE) })
  .transform((n) => Math.round(n))
  .refine((n) => isResetDelay(n), { message: RESET_MESSAGE, params: UNUSABLE })
  .nullable()
  .optional()
  .transform((n) => n ?? null);

const creditNumber = z
  .number({ error: numberError(CREDIT_MESSAGE) })
  .refine((n) => Math.abs(n) < CREDIT_LIMIT, {
    message: CREDIT_MESSAGE,
    params: UNUSABLE,
    abort: true,
  });
const orNull = (n: z.ZodType<number>) =>
  n
    .nullable()
    .optional()
    .transform((v) => v ?? null);
const creditValue = orNull(creditNumber);

/**
 * Tokens one call used, as a client reports them beside `limits` (`usage`): what a counted window
 * (docs/providers.md) spends. A whole number from 0 up to this; a fraction is rounded, a value
 * outside the range is unusable (stored as null, with a warning). No model reads or writes a
 * billion tokens in one call.
 */
export const MAX_USAGE_TOKENS = 1_000_000_000;
const USAGE_MESSAGE = `must be a whole number from 0 to ${MAX_USAGE_TOKENS}`;

const tokenCount = z
  .number({ error: numberError(USAGE_MESSAGE) })
  .transform((n) => Math.round(n))
  .refine((n) => n >= 0 && n <= MAX_USAGE_TOKENS, { message: USAGE_MESSAGE, params: UNUSABLE })
  .nullable()
  .optional()
  .transform((n) => n ?? null);

export const usageSchema = z
  .object(
    {
      input_tokens: tokenCount,
      output_tokens: tokenCount,
      cached_tokens: tokenCount,
    },
    { error: "expected an object or null" },
  )
  .meta({
    description:
      "What the call used, as the provider's answer says: input (prompt) tokens, output (completion) tokens, and the input tokens read from a cache. Each a whole number from 0 to 1,000,000,000 or null. Optional: where a provider states no remaining, Headroom counts reports and these tokens against a learned or declared limit (docs/providers.md).",
  });

export const limitsSchema = z.object(
  {
    requests_limit: limitValue,
    requests_remaining: limitValue,
    tokens_limit: limitValue,
    tokens_remaining: limitValue,
    reset_requests_ms: resetValue,
    reset_tokens_ms: resetValue,
  },
  { error: "expected an object" },
);

export const creditsSchema = z.object(
  {
    credits_limit: creditValue,
    credits_remaining: creditValue,
    // A cost is spent, never given back: the rollups' sums and Prometheus's cost counter only
    // grow (a balance may go below zero; a cost may not).
    request_cost: orNull(
      creditNumber.refine((n) => n >= 0, { message: "must not be negative", params: UNUSABLE }),
    ),
  },
  { error: "expected an object or null" },
);

const ISO_TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|[+-]\d{2}(?::?\d{2})?)$/i;

/** Parses an ISO 8601 date-time with `Z` or an offset, any fractional precision, to UTC ms. */
export function parseIsoTimestamp(text: string): number | null {
  if (text.length === CANONICAL_LENGTH) {
    const ms = parseCanonical(text);
    if (!Number.isNaN(ms)) return ms;
  }
  return parseIsoTimestampFully(text);
}

/** parseIsoTimestamp by the regex alone, for every form: the reference of the canonical path. */
export function parseIsoTimestampFully(text: string): number | null {
  const m = ISO_TIMESTAMP.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac = "", zone = "Z"] = m;
  const ms = Number(`${frac}000`.slice(0, 3));
  const utc = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  const check = new Date(utc);
  // Date.UTC rolls 2024-02-30 over into March; a real date survives the round trip.
  if (
    check.getUTCFullYear() !== Number(y) ||
    check.getUTCMonth() !== Number(mo) - 1 ||
    check.getUTCDate() !== Number(d) ||
    Number(h) > 23 ||
    Number(mi) > 59 ||
    Number(s) > 59
  ) {
    return null;
  }
  if (zone.toUpperCase() === "Z") return utc;
  const sign = zone.startsWith("-") ? -1 : 1;
  const digits = zone.slice(1).replace(":", "");
  const offsetMinutes = Number(digits.slice(2, 4) || "0");
  const offsetMin = Number(digits.slice(0, 2)) * 60 + offsetMinutes;
  if (offsetMin > 18 * 60 || offsetMinutes > 59) return null;
  return utc - sign * offsetMin * 60_000;
}

/** `YYYY-MM-DDTHH:MM:SS.sssZ`, what toISOString writes and most clients send. */
const CANONICAL_LENGTH = 24;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** The canonical text last parsed, and its ms: toRecord gives it back instead of formatting. */
let canonicalMs = Number.NaN;
let canonicalText = "";

/**
 * A canonical timestamp of an existing date and time at or after year 100 (Date.UTC reads
 * smaller years as 19xx) → its UTC ms, without the regex; NaN for anything else, which the
 * full parser then decides.
 */
function parseCanonical(t: string): number {
  if (
    t.charCodeAt(4) !== 45 ||
    t.charCodeAt(7) !== 45 ||
    t.charCodeAt(10) !== 84 ||
    t.charCodeAt(13) !== 58 ||
    t.charCodeAt(16) !== 58 ||
    t.charCodeAt(19) !== 46 ||
    t.charCodeAt(23) !== 90
  )
    return Number.NaN;
  const y = digits(t, 0, 4);
  const mo = digits(t, 5, 2);
  const d = digits(t, 8, 2);
  const h = digits(t, 11, 2);
  const mi = digits(t, 14, 2);
  const s = digits(t, 17, 2);
  const frac = digits(t, 20, 3);
  // NaN (a non-digit) fails every comparison.
  if (!(y >= 100 && mo >= 1 && mo <= 12 && d >= 1 && h <= 23 && mi <= 59 && s <= 59 && frac >= 0))
    return Number.NaN;
  const leap = mo === 2 && y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  if (d > (DAYS_IN_MONTH[mo - 1] as number) + (leap ? 1 : 0)) return Number.NaN;
  const ms = Date.UTC(y, mo - 1, d, h, mi, s, frac);
  canonicalMs = ms;
  canonicalText = t;
  return ms;
}

/** The decimal number written by `length` ASCII digits at `from`; NaN if one is not a digit. */
function digits(t: string, from: number, length: number): number {
  let n = 0;
  for (let i = from; i < from + length; i++) {
    const c = t.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return Number.NaN;
    n = n * 10 + c;
  }
  return n;
}

/** The ISO text of a timestamp in ms (toISOString's), reusing the canonical text just parsed. */
export function isoOf(ms: number): string {
  return ms === canonicalMs ? canonicalText : new Date(ms).toISOString();
}

const timestampSchema = z
  .string({ error: "expected an ISO 8601 date-time string" })
  // Not UTF-8 is hostile input, refused like anywhere else; a string that is no date is only
  // unusable (below).
  .refine(wellFormed, NOT_UTF8)
  .transform((text, ctx) => {
    const ms = parseIsoTimestamp(text);
    if (ms === null) {
      ctx.addIssue({
        code: "custom",
        message: "expected an ISO 8601 date-time with Z or an offset",
        params: UNUSABLE,
      });
      return z.NEVER;
    }
    if (ms < MIN_TIMESTAMP_MS || ms > Date.now() + MAX_FUTURE_MS) {
      ctx.addIssue({
        code: "custom",
        message: "must lie between 2000-01-01 and 24 h from now",
        params: UNUSABLE,
      });
      return z.NEVER;
    }
    return ms;
  });

const headersSchema = z
  .union([z.record(z.string(), z.string()), z.array(z.tuple([z.string(), z.string()]))])
  .meta({
    description:
      'The provider response\'s headers as received: an object of name to value, or an array of [name, value] pairs (a name sent twice is joined with ", "). Names are case-insensitive. Only rate-limit and quota headers are kept (at most 64, name up to 128 and value up to 512 characters); every other header is dropped at the edge and never stored.',
  });

/** A pool label (docs/pools.md): short, of characters safe in any key, path or label. */
export const POOL_LABEL = /^[A-Za-z0-9._-]{1,64}$/;
export const POOL_LABEL_MESSAGE = "must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'";

/** The request body, per docs/report-api.md. Unknown keys are stripped. */
export const reportBodySchema = z.object(
  {
    provider: z
      .string({ error: "required: a non-empty string" })
      .refine(wellFormed, NOT_UTF8)
      .transform((s) => s.trim().toLowerCase())
      .pipe(
        z
          .string()
          .min(1, "must not be empty")
          .max(MAX_LENGTH.provider, `must be at most ${MAX_LENGTH.provider} characters`),
      ),
    limits: limitsSchema,
    app: z
      .string({ error: "expected a string" })
      .refine(wellFormed, NOT_UTF8)
      .transform((s) => s.trim())
      .pipe(z.string().max(MAX_LENGTH.app, `must be at most ${MAX_LENGTH.app} characters`))
      .nullable()
      .optional()
      .transform((s) => (s ? s : "default")),
    model: z
      .string({ error: "expected a string or null" })
      .refine(wellFormed, NOT_UTF8)
      .pipe(
        z
          .string()
          .min(1, "must not be empty")
          .max(MAX_LENGTH.model, `must be at most ${MAX_LENGTH.model} characters`),
      )
      .nullable()
      .optional()
      .transform((s) => s ?? null),
    timestamp: timestampSchema.nullable().optional(),
    pool: z
      .string({ error: "expected a string or null" })
      .regex(POOL_LABEL, POOL_LABEL_MESSAGE)
      .nullable()
      .optional()
      .meta({
        description:
          "The pool the report draws on, when the provider's answer does not name its account (docs/pools.md): a label such as openai-prod, up to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'. Reports of one project, provider and model with the same label share one headroom. Any other value is stored as null, with a warning.",
      }),
    credits: creditsSchema.nullable().optional(),
    usage: usageSchema.nullable().optional(),
    // What the provider said (src/report/provider-said.ts reads them: only allowlisted headers are
    // kept, within bounds). Declared here for the document and the types; never a refused report.
    headers: headersSchema.nullable().optional().catch(null),
    error: z
      .unknown()
      .meta({
        description:
          "The provider's JSON error body, as received, when the call failed on a limit (e.g. Gemini's 429 body). Any JSON value; stored as null (with a warning) when nested deeper than 16 levels or longer than 16,384 characters as JSON.",
      })
      .optional(),
  },
  { error: "expected a JSON object" },
);

export type ReportBody = z.output<typeof reportBodySchema>;

const isoMs = z.iso.datetime({ precision: 3 });

/** The same schema for every key of a shape: the stored columns reuse the wire field names. */
export function eachKey<K extends string, S extends z.ZodType>(
  shape: Record<K, unknown>,
  schema: S,
) {
  return Object.fromEntries(Object.keys(shape).map((k) => [k, schema])) as Record<K, S>;
}

/** The stored report: one row of ClickHouse `reports`, in column order. */
export const reportRecordSchema = z.object({
  report_id: z.string().regex(UUID_TEXT, "expected a UUID"),
  project_id: z.string().min(1),
  key_id: z.string().min(1),
  app: z.string().min(1),
  provider: z.string().min(1),
  model: z.string().nullable(),
  timestamp: isoMs,
  received_at: isoMs,
  ...eachKey(limitsSchema.shape, z.number().int().nullable()),
  ...eachKey(creditsSchema.shape, z.number().nullable()),
  // What the provider said (provider-said.ts): present only on a report that said something, so
  // that a report with neither field is the record, and the decoded row, it was before them.
  /** The kept rate-limit headers as compact JSON text, or null. */
  headers: z.string().nullable().optional(),
  /** The provider's error body as compact JSON text, or null. */
  error: z.string().nullable().optional(),
  // The pool a report draws on (docs/pools.md): present only on a report that names one.
  /** The keyed hash of the account the provider named (report/pool-account.ts), or null. */
  account: z.string().nullable().optional(),
  /** The client's pool label, or null. */
  pool: z.string().nullable().optional(),
  // What the call used (`usage`): present only on a report that sent a figure of it.
  usage_input_tokens: z.number().int().nullable().optional(),
  usage_output_tokens: z.number().int().nullable().optional(),
  usage_cached_tokens: z.number().int().nullable().optional(),
});

/** The usage columns, in the order of `usage`'s fields. */
export const USAGE_COLUMNS = [
  "usage_input_tokens",
  "usage_output_tokens",
  "usage_cached_tokens",
] as const satisfies (keyof z.infer<typeof reportRecordSchema>)[];

/**
 * The columns of what the provider said, of the pool and of the usage: absent from a record
 * without them (a report of the contract's client is the record it was before they were).
 */
const SAID_COLUMNS = new Set<string>(["headers", "error", "account", "pool", ...USAGE_COLUMNS]);

export type ReportRecord = z.infer<typeof reportRecordSchema>;
export type ReportColumn = keyof ReportRecord;
export const REPORT_COLUMNS = Object.keys(reportRecordSchema.shape) as ReportColumn[];
export const LIMIT_FIELDS = Object.keys(limitsSchema.shape) as (keyof ReportBody["limits"])[];
export const CREDIT_FIELDS = Object.keys(creditsSchema.shape) as (keyof NonNullable<
  ReportBody["credits"]
>)[];

/** Positional form of a record, in REPORT_COLUMNS order; ClickHouse text for times and credits. */
export type ReportRow = (string | number | null)[];

export interface ServerFields {
  reportId: string;
  projectId: string;
  keyId: string;
  receivedAt: number;
}

/** The receive time's ISO text: reports received in the same millisecond share it. */
let lastReceived = { ms: Number.NaN, iso: "" };
function receivedIso(ms: number): string {
  if (lastReceived.ms !== ms) lastReceived = { ms, iso: new Date(ms).toISOString() };
  return lastReceived.iso;
}

/** What the provider said, as the record stores it (provider-said.ts makes it). */
export interface SaidFields {
  headers: string | null;
  error: string | null;
  /** The account's keyed hash (pool-account.ts), when the provider named one. */
  account?: string | null;
}

const SAID_NOTHING: SaidFields = Object.freeze({ headers: null, error: null });

export function toRecord(
  body: ReportBody,
  server: ServerFields,
  said: SaidFields = SAID_NOTHING,
): ReportRecord {
  const receivedAt = receivedIso(server.receivedAt);
  const timestamp = body.timestamp == null ? receivedAt : isoOf(body.timestamp);
  const record = buildRecord(body, server, timestamp, receivedAt);
  if (said.headers !== null || said.error !== null) {
    record.headers = said.headers;
    record.error = said.error;
  }
  if (said.account != null) record.account = said.account;
  if (body.pool != null) record.pool = body.pool;
  const u = body.usage;
  if (
    u != null &&
    (u.input_tokens !== null || u.output_tokens !== null || u.cached_tokens !== null)
  ) {
    record.usage_input_tokens = u.input_tokens;
    record.usage_output_tokens = u.output_tokens;
    record.usage_cached_tokens = u.cached_tokens;
  }
  return record;
}

/** Field names are spliced into the compiled functions below: only plain identifiers. */
const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;
for (const f of [...LIMIT_FIELDS, ...CREDIT_FIELDS, ...Object.keys(reportRecordSchema.shape)]) {
  if (!IDENTIFIER.test(f)) throw new Error(`report field ${f} is not an identifier`);
}

/**
 * The record as one object literal compiled from the schema's field lists, so that every record
 * has one shape from the start. A credits object whose three fields are all null is stored as
 * "no credits".
 */
const buildRecord = new Function(
  "body",
  "server",
  "timestamp",
  "receivedAt",
  `const c = body.credits;
  const credits = c != null && (${CREDIT_FIELDS.map((k) => `c.${k} !== null`).join(" || ")});
  return {
    report_id: server.reportId,
    project_id: server.projectId,
    key_id: server.keyId,
    app: body.app,
    provider: body.provider,
    model: body.model,
    timestamp,
    received_at: receivedAt,
    ${LIMIT_FIELDS.map((k) => `${k}: body.limits.${k}`).join(",\n    ")},
    ${CREDIT_FIELDS.map((k) => `${k}: credits ? c.${k} : null`).join(",\n    ")}
  };`,
) as (
  body: ReportBody,
  server: ServerFields,
  timestamp: string,
  receivedAt: string,
) => ReportRecord;

const TIME_COLUMNS = new Set<ReportColumn>(["timestamp", "received_at"]);
const CREDIT_COLUMNS = new Set<string>(CREDIT_FIELDS);

/** ISO `2024-05-01T10:00:00.123Z` → ClickHouse DateTime64(3) text `2024-05-01 10:00:00.123`. */
const toClickHouseTime = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
const CLICKHOUSE_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$/;
/** Anything else (a row ClickHouse refused) is shown as it is, for an operator to fix. */
const fromClickHouseTime = (text: string) =>
  CLICKHOUSE_TIME.test(text) ? `${text.slice(0, 10)}T${text.slice(11, 23)}Z` : text;

const REPORT_ID_INDEX = REPORT_COLUMNS.indexOf("report_id");
const RECEIVED_AT_INDEX = REPORT_COLUMNS.indexOf("received_at");

/** The report id of a row. */
export const reportIdOf = (row: ReportRow) => String(row[REPORT_ID_INDEX]);

/** When the edge received a row's report, in Unix ms (NaN for a row that is not a report's). */
export const receivedAtMsOf = (row: ReportRow) =>
  Date.parse(fromClickHouseTime(String(row[RECEIVED_AT_INDEX])));

/** A one-entry memo of toClickHouseTime: a batch's reports share their receive time. */
function timeColumn(): (iso: string) => string {
  let lastIso = "";
  let lastText = "";
  return (iso) => {
    if (iso !== lastIso) {
      lastText = toClickHouseTime(iso);
      lastIso = iso;
    }
    return lastText;
  };
}

/** How each column's value becomes row text, in REPORT_COLUMNS order (null: as it is). */
const TO_ROW_VALUE = REPORT_COLUMNS.map((column): ((v: never) => string) | null =>
  TIME_COLUMNS.has(column)
    ? timeColumn()
    : // Decimal text keeps credits exact; JSON numbers like 1e-7 would not parse as Decimal.
      CREDIT_COLUMNS.has(column)
      ? (v: number) => v.toFixed(12)
      : null,
);

/** A record → its row, compiled from REPORT_COLUMNS: one named read per column, no loop. */
export const toRow = new Function(
  "convert",
  `return (r) => [${REPORT_COLUMNS.map((c, i) =>
    TO_ROW_VALUE[i]
      ? `r.${c} === null ? null : convert[${i}](r.${c})`
      : SAID_COLUMNS.has(c)
        ? `r.${c} ?? null`
        : `r.${c}`,
  ).join(", ")}];`,
)(TO_ROW_VALUE) as (record: ReportRecord) => ReportRow;

export function fromRow(row: ReportRow): ReportRecord {
  const record: Record<string, unknown> = {};
  REPORT_COLUMNS.forEach((column, i) => {
    const value = row[i] ?? null;
    if (value === null) {
      if (!SAID_COLUMNS.has(column)) record[column] = null;
    } else if (TIME_COLUMNS.has(column)) record[column] = fromClickHouseTime(String(value));
    else if (CREDIT_COLUMNS.has(column)) record[column] = Number(value);
    else record[column] = value;
  });
  return record as ReportRecord;
}
