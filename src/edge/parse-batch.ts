import { HttpError } from "../http/errors.js";
import {
  inspect,
  MAX_JSON_DEPTH,
  parseJsonBody,
  parseJsonText,
  suspectText,
} from "./parse-report.js";

// A batch's body → its items, each a JSON value or that item's own error. The envelope is
// refused as a whole only when it is broken: not JSON, not an array, too many items. Each item
// gets the single report's hostile-structure checks (parseJsonBody's), so one junk item costs
// only itself.

export type BatchItem = { value: unknown } | { error: HttpError };

export type BatchFormat = "json" | "ndjson";

const tooMany = (max: number) =>
  new HttpError("payload_too_large", `a batch holds at most ${max} reports`);

export function parseBatchBody(body: Buffer, format: BatchFormat, maxItems: number): BatchItem[] {
  if (body.length === 0) throw new HttpError("invalid_json", "the body is empty");
  return format === "json" ? parseJsonArray(body, maxItems) : parseNdjson(body, maxItems);
}

function parseJsonArray(body: Buffer, maxItems: number): BatchItem[] {
  const { value, text, validUtf8 } = parseJsonText(body);
  if (!Array.isArray(value)) {
    throw new HttpError("invalid_report", "(body): expected an array of reports", {
      issues: [{ path: "(body)", message: "expected an array of reports" }],
    });
  }
  if (value.length > maxItems) throw tooMany(maxItems);
  // An item gets the full walk (paths, messages) only when it could hold a problem: the text
  // has bad UTF-8 or a suspect key, or the item nests deeper than a body may. The depth check
  // walks the parsed value without allocating; it is bounded by MAX_JSON_DEPTH, so deep junk
  // costs no more than a report.
  const suspect = !validUtf8 || suspectText(text);
  return value.map((item) => {
    if (!suspect && !deeperThan(item, MAX_JSON_DEPTH)) return { value: item };
    const issues = inspect(item, !validUtf8);
    const first = issues[0];
    if (!first) return { value: item };
    return {
      error: new HttpError("invalid_report", `${first.path}: ${first.message}`, { issues }),
    };
  });
}

/** Whether a parsed value nests deeper than `max` levels; stops at the first that does. */
function deeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== "object") return false;
  if (max <= 0) return true;
  if (Array.isArray(value)) {
    for (const v of value) if (deeperThan(v, max - 1)) return true;
    return false;
  }
  for (const k in value)
    if (deeperThan((value as Record<string, unknown>)[k], max - 1)) return true;
  return false;
}

/** One report a line; blank lines are skipped, a line that is no report is that item's error. */
function parseNdjson(body: Buffer, maxItems: number): BatchItem[] {
  const lines: Buffer[] = [];
  let start = 0;
  while (start < body.length) {
    let end = body.indexOf(10, start);
    if (end < 0) end = body.length;
    let stop = end;
    if (stop > start && body[stop - 1] === 13) stop--;
    const line = body.subarray(start, stop);
    if (!isBlank(line)) {
      if (lines.length === maxItems) throw tooMany(maxItems);
      lines.push(line);
    }
    start = end + 1;
  }
  if (lines.length === 0) throw new HttpError("invalid_json", "the body holds no report");
  return lines.map((line) => {
    try {
      return { value: parseJsonBody(line) };
    } catch (err) {
      if (err instanceof HttpError) return { error: err };
      throw err;
    }
  });
}

function isBlank(line: Buffer): boolean {
  for (const b of line) if (b !== 32 && b !== 9 && b !== 13) return false;
  return true;
}
