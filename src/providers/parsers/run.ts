import type { ParseResult, ParserInput } from "../parser.js";
import { HeaderReader } from "../read-headers.js";

/** Runs `read` over a report's headers and returns what it found, Retry-After applied last. */
export function readHeaders(source: ParserInput, read: (r: HeaderReader) => void): ParseResult {
  const r = new HeaderReader(source.headers, source.at);
  read(r);
  r.applyRetryAfter();
  return { windows: r.windows, warnings: r.warnings };
}
