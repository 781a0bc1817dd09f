// `param_<name>` values arrive as clickhouse-server expects them: text in the "escaped" format
// (`a\tb`, `['it\'s']`, `\N`). chdb's bind API takes JS values and escapes strings itself
// (TSV-escaping every backslash), so a raw value must be turned into one whose re-escaped form
// the engine reads back to the same value. Values without backslashes pass through unchanged.

const ESCAPES: Record<string, string> = {
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
  "0": "\0",
  a: "\x07",
  v: "\v",
  e: "\x1b",
};

/** One escape sequence at `s[i] === "\\"`: the character it stands for and where it ends. */
function readEscape(s: string, i: number): [string, number] {
  const c = s[i + 1];
  if (c === undefined) return ["\\", i + 1];
  if (c === "x" && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 2, i + 4))) {
    return [String.fromCharCode(Number.parseInt(s.slice(i + 2, i + 4), 16)), i + 4];
  }
  return [ESCAPES[c] ?? c, i + 2];
}

function unescapeText(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; ) {
    if (s[i] === "\\") {
      const [ch, next] = readEscape(s, i);
      out += ch;
      i = next;
    } else {
      out += s[i];
      i++;
    }
  }
  return out;
}

/**
 * Composite literals (`['a\'b']`, `{'k':'v'}`): inside single-quoted strings, escapes become the
 * characters they stand for and a quote becomes `''`, so no backslash is left for chdb to double.
 */
function requoteComposite(s: string): string {
  let out = "";
  let quoted = false;
  for (let i = 0; i < s.length; ) {
    const c = s[i] as string;
    if (!quoted) {
      if (c === "'") quoted = true;
      out += c;
      i++;
    } else if (c === "\\") {
      const [ch, next] = readEscape(s, i);
      out += ch === "'" ? "''" : ch;
      i = next;
    } else if (c === "'" && s[i + 1] === "'") {
      out += "''";
      i += 2;
    } else {
      if (c === "'") quoted = false;
      out += c;
      i++;
    }
  }
  return out;
}

const COMPOSITE =
  /^(?:Nullable\(|LowCardinality\()*(?:Array|Map|Tuple|Nested|Variant|Dynamic|JSON|Object)\b/i;

/** The value to hand to chdb's bind for a raw HTTP parameter of the given declared type. */
export function toBindValue(raw: string, type: string | undefined): string | null {
  if (raw === "\\N") return null;
  if (!raw.includes("\\")) return raw;
  return type !== undefined && COMPOSITE.test(type.trim())
    ? requoteComposite(raw)
    : unescapeText(raw);
}
