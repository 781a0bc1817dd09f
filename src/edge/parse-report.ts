import { isUtf8 } from "node:buffer";
import {
  type ReportRecord,
  reportBodySchema,
  type ServerFields,
  toRecord,
} from "../report/report-schema.js";
import { HttpError } from "./errors.js";

const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/** Body bytes → JSON value, or `invalid_json`. Rejects invalid UTF-8 and prototype keys. */
export function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw new HttpError("invalid_json", "the body is empty");
  if (!isUtf8(body)) throw new HttpError("invalid_json", "the body is not valid UTF-8");
  const text = body.toString("utf8");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new HttpError("invalid_json", `the body is not valid JSON: ${(err as Error).message}`);
  }
  // The walk is needed only when a forbidden name appears anywhere in the text.
  if (text.includes("__proto__") || text.includes("constructor") || text.includes("prototype")) {
    const path = findForbiddenKey(value);
    if (path !== null) {
      throw new HttpError("invalid_report", `${path}: forbidden key`, {
        issues: [{ path, message: "forbidden key" }],
      });
    }
  }
  return value;
}

/** Iterative, so that deeply nested junk cannot overflow the stack. */
function findForbiddenKey(root: unknown): string | null {
  const stack: [unknown, string][] = [[root, ""]];
  while (stack.length > 0) {
    const [value, path] = stack.pop() as [unknown, string];
    if (value === null || typeof value !== "object") continue;
    for (const key of Object.keys(value)) {
      const childPath = path ? `${path}.${key}` : key;
      if (FORBIDDEN_KEYS.has(key)) return childPath;
      stack.push([(value as Record<string, unknown>)[key], childPath]);
    }
  }
  return null;
}

/** JSON value → normalised record, or `invalid_report` with every issue. */
export function validateReport(value: unknown, server: ServerFields): ReportRecord {
  const parsed = reportBodySchema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({
      path: i.path.map(String).join(".") || "(body)",
      message: i.message,
    }));
    const first = issues[0] as { path: string; message: string };
    throw new HttpError("invalid_report", `${first.path}: ${first.message}`, { issues });
  }
  return toRecord(parsed.data, server);
}
