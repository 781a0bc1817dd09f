import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { sampleBody } from "../fixtures/sample-reports.js";

// Request bodies for the load generators: the realistic sample mix (providers, models, apps,
// provider hints, credits), serialised once. Written to a file at the start of each phase, one
// body per line, for wrk's Lua script and the fixed-rate client: the timestamps are the phase's
// start, well inside the contract's window (up to 24 h ahead of the server's clock, any past).

const MARK = "@@timestamp@@";

export interface BodySource {
  /** Body number `i` (cycling through the templates), stamped with the current time. */
  body(i: number): string;
  size: number;
}

export function createBodySource(templates = 4_096, now: () => number = Date.now): BodySource {
  const parts: [string, string][] = [];
  for (let i = 0; i < templates; i++) {
    const json = JSON.stringify({ ...sampleBody(i), timestamp: MARK });
    const at = json.indexOf(MARK);
    parts.push([json.slice(0, at), json.slice(at + MARK.length)]);
  }
  // toISOString costs more than the splice; one per millisecond is enough.
  let stampedAt = -1;
  let stamp = "";
  return {
    size: parts.length,
    body(i) {
      const t = now();
      if (t !== stampedAt) {
        stampedAt = t;
        stamp = new Date(t).toISOString();
      }
      const [head, tail] = parts[i % parts.length] as [string, string];
      return head + stamp + tail;
    },
  };
}

export interface LoadFiles {
  bodiesFile: string;
  keysFile: string;
}

/** Writes `<name>.bodies` (one body per line, stamped now) and `<name>.keys` into `dir`. */
export function writeLoadFiles(
  dir: string,
  name: string,
  keys: string[],
  opts: { bodies?: number; now?: () => number } = {},
): LoadFiles {
  const source = createBodySource(opts.bodies ?? 4_096, opts.now);
  const bodies = Array.from({ length: source.size }, (_, i) => source.body(i));
  const files = { bodiesFile: join(dir, `${name}.bodies`), keysFile: join(dir, `${name}.keys`) };
  // JSON.stringify never writes a raw newline, so each body is exactly one line.
  writeFileSync(files.bodiesFile, `${bodies.join("\n")}\n`);
  writeFileSync(files.keysFile, `${keys.join("\n")}\n`);
  return files;
}

/**
 * Writes `<name>.bodies` with `batches` batches for POST /api/reports (one JSON array of `size`
 * reports of the sample mix per line, stamped now) and `<name>.keys` into `dir`.
 */
export function writeBatchFiles(
  dir: string,
  name: string,
  keys: string[],
  opts: { batches: number; size: number; now?: () => number },
): LoadFiles {
  const source = createBodySource(opts.batches * opts.size, opts.now);
  const batches = Array.from({ length: opts.batches }, (_, b) => {
    const items = Array.from({ length: opts.size }, (_, i) => source.body(b * opts.size + i));
    return `[${items.join(",")}]`;
  });
  const files = { bodiesFile: join(dir, `${name}.bodies`), keysFile: join(dir, `${name}.keys`) };
  writeFileSync(files.bodiesFile, `${batches.join("\n")}\n`);
  writeFileSync(files.keysFile, `${keys.join("\n")}\n`);
  return files;
}
