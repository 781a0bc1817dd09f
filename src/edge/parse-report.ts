import { isUtf8 } from "node:buffer";
import { HttpError, type Issue } from "../http/errors.js";
import { windowsOfRecord } from "../providers/derive-windows.js";
import { plainReportBody } from "../report/plain-report.js";
import { accountOf } from "../report/pool-account.js";
import { readProviderSaid } from "../report/provider-said.js";
import {
  type ReportBody,
  type ReportRecord,
  reportBodySchema,
  type ServerFields,
  toRecord,
  unusableValue,
} from "../report/report-schema.js";

const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);
/** A report is three levels deep; anything far deeper is junk, whatever field it is in. */
export const MAX_JSON_DEPTH = 32;
const NOT_UTF8 = "must be valid UTF-8";

/**
 * Body bytes → the JSON value, the text it was parsed from, and whether the bytes were valid
 * UTF-8; unparseable text is `invalid_json`. Invalid bytes decode to U+FFFD: if the text still
 * parses they were inside strings, which the caller's checks find.
 */
export function parseJsonText(body: Buffer): { value: unknown; text: string; validUtf8: boolean } {
  const validUtf8 = isUtf8(body);
  const text = body.toString("utf8");
  try {
    return { value: JSON.parse(text), text, validUtf8 };
  } catch (err) {
    throw new HttpError("invalid_json", `the body is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Body bytes → JSON value. Unparseable text is `invalid_json`; parseable JSON with strings that
 * are not valid UTF-8, prototype keys (escaped or not) or absurd nesting is `invalid_report`.
 */
export function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw new HttpError("invalid_json", "the body is empty");
  const { value, text, validUtf8 } = parseJsonText(body);
  // Walking every key is for bodies that could hold a problem; a plain report cannot.
  if (validUtf8 && !mayHideProblem(text)) return value;
  const issues = inspect(value, !validUtf8);
  if (!validUtf8 && issues.length === 0) issues.push({ path: "(body)", message: NOT_UTF8 });
  const first = issues[0];
  if (first) throw new HttpError("invalid_report", `${first.path}: ${first.message}`, { issues });
  return value;
}

const FORBIDDEN_WORD = /__proto__|constructor|prototype/;

/**
 * Whether the text could spell a forbidden key: plainly, or with a `\u` escape (the only way to
 * spell one differently). Two searches rather than one regex with `\u` as a fourth alternative:
 * with no two-character alternative the regex can skip ahead by the words' length.
 */
export const suspectText = (text: string): boolean =>
  FORBIDDEN_WORD.test(text) || text.includes("\\u");

/**
 * Whether the text could hold a forbidden key (also escaped: only a `\u` escape can spell one
 * differently) or nesting deeper than MAX_JSON_DEPTH (which needs that many brackets).
 */
function mayHideProblem(text: string): boolean {
  if (suspectText(text)) return true;
  let brackets = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // `{` and `[`, inside strings or not: an over-count only means the full walk.
    if ((c === 123 || c === 91) && ++brackets > MAX_JSON_DEPTH) return true;
  }
  return false;
}

/**
 * Every key at any depth (a `\u005f_proto__` is only a `__proto__` once parsed), so this walks
 * the value, not the text. Iterative, so that deeply nested junk cannot overflow the stack.
 */
export function inspect(root: unknown, badUtf8: boolean): Issue[] {
  const issues: Issue[] = [];
  const stack: [unknown, string, number][] = [[root, "", 1]];
  while (stack.length > 0) {
    const [value, path, depth] = stack.pop() as [unknown, string, number];
    if (typeof value === "string") {
      if (badUtf8 && value.includes("\uFFFD"))
        issues.push({ path: path || "(body)", message: NOT_UTF8 });
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (depth > MAX_JSON_DEPTH) {
      issues.push({ path, message: `nested deeper than ${MAX_JSON_DEPTH} levels` });
      continue;
    }
    for (const key of Object.keys(value)) {
      const childPath = path ? `${path}.${key}` : key;
      if (FORBIDDEN_KEYS.has(key)) issues.push({ path: childPath, message: "forbidden key" });
      else if (badUtf8 && key.includes("\uFFFD"))
        issues.push({ path: childPath, message: NOT_UTF8 });
      else stack.push([(value as Record<string, unknown>)[key], childPath, depth + 1]);
    }
  }
  return issues;
}

export interface ValidReport {
  record: ReportRecord;
  /** Optional values that were unusable, and were stored as null or cut, with why. */
  warnings: Issue[];
}

const pathOf = (path: PropertyKey[]) => path.map(String).join(".") || "(body)";

const DAY_MS = 24 * 60 * 60 * 1000;

export interface ValidateOptions {
  /**
   * Reports whose timestamp is older than this many days before receipt are stored at their
   * receive time: the tables keep nothing older, and each month of client time is a partition
   * of the rollups, so years of back-dated reports in one batch would make an insert ClickHouse
   * refuses (TOO_MANY_PARTS) and a tenant's clock decide how many parts everyone's inserts make.
   */
  retentionDays: number;
  /**
   * POOL_SECRET: the key of the account hashes (report/pool-account.ts). Without it the account
   * a provider names is dropped with every other header, and its reports are pooled by label only.
   */
  poolSecret?: string;
}

/**
 * JSON value → normalised record, or `invalid_report` with every issue that makes it no report.
 * An unusable optional value (out of range, too long, empty, a timestamp out of its window) is
 * no reason to lose the report: it is stored as null, or cut, and named in `warnings`.
 */
export function validateReport(
  value: unknown,
  server: ServerFields,
  options: ValidateOptions,
): ValidReport {
  // A report with nothing to fix or refuse skips zod; the schema has the last word on the rest.
  const plain = plainReportBody(value);
  if (plain) return finish(value, plain, [], server, options);
  return validateReportBySchema(value, server, options);
}

/** validateReport through reportBodySchema alone, for every body: the reference of the fast path. */
export function validateReportBySchema(
  value: unknown,
  server: ServerFields,
  options: ValidateOptions,
): ValidReport {
  let input = value;
  const warnings: Issue[] = [];
  // Each pass fixes every unusable value zod found; a value is fixed at most once.
  for (let pass = 0; pass < 3; pass++) {
    const parsed = reportBodySchema.safeParse(input);
    if (parsed.success) return finish(value, parsed.data, warnings, server, options);
    const fatal = parsed.error.issues.filter((i) => !unusableValue(i, valueAt(input, i.path)));
    if (fatal.length > 0 || pass === 2) {
      const issues = (fatal.length > 0 ? fatal : parsed.error.issues).map((i) => ({
        path: pathOf(i.path),
        message: i.message,
      }));
      const first = issues[0] as Issue;
      throw new HttpError("invalid_report", `${first.path}: ${first.message}`, { issues });
    }
    input = structuredClone(input);
    for (const issue of parsed.error.issues) {
      const fix = unusableValue(issue, valueAt(input, issue.path)) as { value: unknown };
      setAt(input, issue.path, fix.value);
      warnings.push({
        path: pathOf(issue.path),
        message: `${issue.message}: stored as ${fix.value === null ? "null" : "cut"}`,
      });
    }
  }
  throw new Error("unreachable");
}

/** The record of a valid body, its timestamp dropped when older than the retention. */
function finish(
  sent: unknown,
  body: ReportBody,
  warnings: Issue[],
  server: ServerFields,
  options: ValidateOptions,
): ValidReport {
  const oldest = server.receivedAt - options.retentionDays * DAY_MS;
  // What the provider said: kept headers and error body, read from the body as sent (the schema
  // only declares them). Every header outside the allowlist ends here.
  const said = readProviderSaid(sent);
  if (said.warnings.length > 0) warnings.push(...said.warnings);
  if (body.timestamp != null && body.timestamp < oldest) {
    body.timestamp = null;
    warnings.push({
      path: "timestamp",
      message: `older than the retention of ${options.retentionDays} days: stored as the receive time`,
    });
  }
  // The account the provider named, hashed here: its clear value goes no further than this line.
  const sentHeaders = (sent as { headers?: unknown }).headers;
  const account = accountOf(options.poolSecret, server.projectId, body.provider, sentHeaders);
  const record = toRecord(body, server, account === null ? said : { ...said, account });
  // What the parsers could not read (Azure's -1, junk values) is said in the answer, as any
  // unusable value is; the worker derives the same windows from the stored record.
  if (record.headers != null || record.error != null)
    warnings.push(...windowsOfRecord(record, said.values).warnings);
  return { record, warnings };
}

function valueAt(root: unknown, path: PropertyKey[]): unknown {
  let v = root;
  for (const k of path) v = (v as Record<PropertyKey, unknown> | null)?.[k];
  return v;
}

function setAt(root: unknown, path: PropertyKey[], value: unknown): void {
  let v = root as Record<PropertyKey, unknown>;
  for (const k of path.slice(0, -1)) v = v[k] as Record<PropertyKey, unknown>;
  v[path[path.length - 1] as PropertyKey] = value;
}
