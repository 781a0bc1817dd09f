import { z } from "zod";
import { HttpError, type Issue } from "../http/errors.js";

// The read API's query parameters: building blocks for each route's schema, and the one parse
// that turns any problem into a 400 `invalid_query` naming the parameter. Fastify hands a
// repeated parameter over as an array: single-valued ones refuse it, filters take it.

export const SERIES_FIELDS = ["provider", "model", "app"] as const;
export type SeriesField = (typeof SERIES_FIELDS)[number];

const MAX_VALUES = 50;

/** A parameter given once. */
export const single = <T extends z.ZodType<unknown, string>>(schema: T) =>
  z
    .string({
      error: (i) => (Array.isArray(i.input) ? "give this parameter once" : "expected text"),
    })
    .pipe(schema);

/** A repeatable parameter (`?provider=a&provider=b`): always an array of its values. */
const repeatable = <T extends z.ZodType<string, string>>(value: T) =>
  z
    .union([z.string(), z.array(z.string())])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .pipe(z.array(value).min(1).max(MAX_VALUES, `at most ${MAX_VALUES} values`));

/** The edge stores providers trimmed and lowercased: a filter must match what is stored. */
const providerValue = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .transform((p) => p.toLowerCase());
/** The edge stores models as sent (spaces included) and apps trimmed. */
const modelValue = z.string().min(1).max(256);
const appValue = z.string().trim().min(1).max(128);

export const seriesFilters = {
  provider: repeatable(providerValue).optional(),
  model: repeatable(modelValue).optional(),
  app: repeatable(appValue).optional(),
};

export interface SeriesFilters {
  provider?: string[];
  model?: string[];
  app?: string[];
}

const EARLIEST = Date.UTC(2000, 0, 1);
/** The end of the times a parameter or a cursor may hold (ClickHouse formats them as given). */
export const LATEST = Date.UTC(2100, 0, 1);

/** RFC 3339 with `Z` or an offset, between 2000 and 2100 (what the stored types can hold). */
export const time = single(
  z.iso.datetime({ offset: true, error: "expected an RFC 3339 time, e.g. 2025-01-31T12:00:00Z" }),
)
  .transform((t) => Date.parse(t))
  .refine((t) => t >= EARLIEST && t < LATEST, "expected a time from 2000 to 2099");

const SPAN_UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
/** The longest `last`: the longest range any read covers (day windows, lists). */
const MAX_LAST_MS = 400 * 86_400_000;

/**
 * `last=24h`: the range of that span ending now, in minutes, hours or days (`15m`, `6h`, `7d`),
 * instead of `from`/`to`. A dashboard polls it without its query changing as the clock moves.
 */
export const last = single(
  z.string().regex(/^[1-9]\d{0,5}[mhd]$/, "expected a span such as 15m, 24h or 7d"),
)
  .transform((s) => Number(s.slice(0, -1)) * SPAN_UNIT_MS[s.at(-1) as keyof typeof SPAN_UNIT_MS])
  .refine((ms) => ms <= MAX_LAST_MS, "at most 400 days (400d)");

/** A read's range: `from`/`to`, or `last`; neither is the last 24 h (time-range.ts). */
export const rangeParams = {
  from: time.optional(),
  to: time.optional(),
  last: last.optional(),
};

/** `group_by=provider,model` or repeated: each of `fields` (provider, model, app) at most once. */
export const groupByOf = <const T extends readonly [string, ...string[]]>(fields: T) =>
  z
    .union([z.string(), z.array(z.string())])
    .transform((v) =>
      (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(",")).map((s) => s.trim()),
    )
    .pipe(z.array(z.enum(fields, { error: (i) => `unknown group_by field "${String(i.input)}"` })))
    .refine((f) => new Set(f).size === f.length, "a field is named twice")
    .optional();

export const groupBy = groupByOf(SERIES_FIELDS);

export const limit = (max: number, fallback: number) =>
  single(
    z
      .string()
      .regex(/^\d{1,6}$/, "expected a whole number")
      .transform(Number)
      .pipe(z.number().min(1).max(max)),
  )
    .optional()
    .transform((n) => n ?? fallback);

/** Parses `query` or throws 400 `invalid_query` with every problem named. */
export function parseQuery<T extends z.ZodType>(schema: T, query: unknown): z.output<T> {
  const parsed = schema.safeParse(query ?? {});
  if (parsed.success) return parsed.data;
  const issues: Issue[] = parsed.error.issues.flatMap((i) =>
    i.code === "unrecognized_keys"
      ? i.keys.map((k) => ({ path: k, message: "unknown parameter" }))
      : [{ path: String(i.path[0] ?? "query"), message: i.message }],
  );
  const named = issues.map((i) => `${i.path}: ${i.message}`).join("; ");
  throw invalidQuery(named, issues);
}

export const invalidQuery = (message: string, issues?: Issue[]) =>
  new HttpError("invalid_query", message, issues ? { issues } : {});

/** SQL conditions for the filters that are set, with their parameters. */
export function filterSql(filters: SeriesFilters): {
  sql: string;
  params: Record<string, string[]>;
} {
  let sql = "";
  const params: Record<string, string[]> = {};
  for (const field of SERIES_FIELDS) {
    const values = filters[field];
    if (!values) continue;
    // A model filter matches what the client sent; '' (no model seen) is not a name.
    sql += ` AND ${field} IN {f_${field}:Array(String)}`;
    params[`f_${field}`] = values;
  }
  return { sql, params };
}
