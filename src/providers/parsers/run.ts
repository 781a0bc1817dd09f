import type { ParseResult } from "../parser.js";
import { HeaderReader, headerMap } from "../read-headers.js";
import type { WindowSource, WindowWarning } from "../window.js";

/** Runs `read` over a report's headers and returns what it found, Retry-After applied last. */
export function readHeaders(source: WindowSource, read: (r: HeaderReader) => void): ParseResult {
  const warnings: WindowWarning[] = [];
  const r = new HeaderReader(headerMap(source.headers, warnings), source.at, warnings);
  read(r);
  r.applyRetryAfter();
  return { windows: r.windows, warnings: r.warnings };
}
