// The items of an import file as it is read, never the whole file at once: a JSON array's
// elements, or NDJSON's lines (blank ones skipped). A backfill of any size is read in constant
// memory; read whole, a file over V8's longest string (~512 MB) could not be read at all.
// An item that is not JSON is one bad item, not a failed file; a file that ends inside its
// array, or goes on after it, is an error.

import { CliError } from "./errors.js";

export type Item = { value: unknown } | { bad: string; reason: string };

/** A file that is not an import file as a whole: one line, exit 1. */
export class ImportFileError extends CliError {
  override name = "ImportFileError";
}

/** The items of `chunks` (text, split anywhere); with `parse: false`, only counted. */
export async function* readItems(
  chunks: AsyncIterable<string> | Iterable<string>,
  opts: { parse?: boolean } = {},
): AsyncGenerator<Item> {
  const splitter = createSplitter(opts.parse ?? true);
  for await (const chunk of chunks) yield* splitter.push(chunk);
  yield* splitter.end();
}

/** What a bad item shows of itself: enough to find it in the file. */
const SHOWN = 200;

export function createSplitter(parse = true) {
  let mode: "start" | "ndjson" | "array" | "done" = "start";
  let first = true;
  // NDJSON: the line read so far. Array: the element read so far, in pieces.
  let pending = "";
  const parts: string[] = [];
  let depth = 0;
  let inString = false;
  let escaped = false;
  let elements = 0;

  const item = (text: string): Item | null => {
    const t = text.trim();
    if (t === "") return null;
    if (!parse) return { value: undefined };
    try {
      return { value: JSON.parse(t) };
    } catch (err) {
      return { bad: t.slice(0, SHOWN), reason: (err as Error).message };
    }
  };

  function pushLines(text: string, out: Item[]) {
    let start = 0;
    for (let nl = text.indexOf("\n", start); nl !== -1; nl = text.indexOf("\n", start)) {
      const it = item(pending + text.slice(start, nl));
      pending = "";
      if (it) out.push(it);
      start = nl + 1;
    }
    pending += text.slice(start);
  }

  function element(out: Item[], text: string, closing: boolean) {
    const whole = parts.join("") + text;
    parts.length = 0;
    // `[]` has no element; `[1,]` and `[,1]` have an empty one, which is a bad item.
    if (whole.trim() === "" && closing && elements === 0) return;
    elements += 1;
    out.push(item(whole) ?? { bad: "", reason: "an empty element" });
  }

  function pushArray(text: string, from: number, out: Item[]) {
    let seg = from;
    for (let i = from; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (mode === "done") {
        if (!isSpace(c)) throw new ImportFileError("the file goes on after its JSON array ends");
        continue;
      }
      if (inString) {
        if (escaped) escaped = false;
        else if (c === BACKSLASH) escaped = true;
        else if (c === QUOTE) inString = false;
      } else if (c === QUOTE) inString = true;
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth += 1;
      else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && depth > 0) depth -= 1;
      else if (c === CLOSE_BRACKET) {
        element(out, text.slice(seg, i), true);
        mode = "done";
      } else if (c === COMMA && depth === 0) {
        element(out, text.slice(seg, i), false);
        seg = i + 1;
      }
    }
    if (mode === "array") parts.push(text.slice(seg));
  }

  return {
    push(chunk: string): Item[] {
      let text = chunk;
      // A byte order mark, as Windows tools write one, is not part of the first item.
      if (first && text.length > 0) {
        first = false;
        if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      }
      const out: Item[] = [];
      let from = 0;
      if (mode === "start") {
        while (from < text.length && isSpace(text.charCodeAt(from))) from++;
        if (from === text.length) return out;
        if (text[from] === "[") {
          mode = "array";
          from += 1;
        } else mode = "ndjson";
      }
      if (mode === "ndjson") pushLines(text.slice(from), out);
      else pushArray(text, from, out);
      return out;
    },
    end(): Item[] {
      if (mode === "array") throw new ImportFileError("the file ends inside its JSON array");
      if (mode !== "ndjson") return [];
      const last = item(pending);
      pending = "";
      return last ? [last] : [];
    },
  };
}

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const [QUOTE, BACKSLASH, COMMA] = [0x22, 0x5c, 0x2c];
const [OPEN_BRACE, CLOSE_BRACE, OPEN_BRACKET, CLOSE_BRACKET] = [0x7b, 0x7d, 0x5b, 0x5d];
