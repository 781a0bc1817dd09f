import fc from "fast-check";
import { CREDIT_FIELDS, LIMIT_FIELDS } from "./report-oracle.js";

// Reports for property tests, as the real client sends them and far from it: odd but legal
// values, every range's corners, wrong types, and mutations that only exist as JSON text
// (duplicate keys, prototype keys, deep nesting, huge strings). Timestamps are drawn relative to
// the clock, so that a seed replays the same values on any day.

// ---- values -------------------------------------------------------------------------------

export const oddStrings = fc.oneof(
  fc.string({ unit: "binary", maxLength: 80 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.string({ unit: "grapheme-ascii", minLength: 100, maxLength: 300 }),
  // Lone surrogates: not Unicode text, cannot be UTF-8.
  fc.string({
    unit: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
    minLength: 1,
    maxLength: 3,
  }),
  fc.constantFrom(
    "",
    " ",
    "\t\n\r",
    "\u0000",
    "a\u0000b",
    "\u202Eevil\u202C",
    "e\u0301\u0301\u0301",
    "👩‍👩‍👧‍👦",
    "\uFEFFbom",
    "\u00A0nbsp\u2003",
    "İSTANBUL",
    "ẞ",
    "\uFFFF\uFFFE",
    "\\",
    '"',
    "\u2028\u2029",
    "'; DROP TABLE reports; --",
    "{{7*7}}$" + "{7*7}",
    "x".repeat(64),
    "x".repeat(65),
    "é".repeat(128),
    "😀".repeat(65),
  ),
);

export const numbers = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(
    0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    2 ** 53,
    2 ** 53 + 2,
    2 ** 63,
    -(2 ** 63),
    2 ** 63 - 1024,
    -(2 ** 63) + 1024,
    1e21,
    -1e21,
    9.99e20,
    1e308,
    -1e308,
    5e-324,
    1e-13,
    // Not exact in binary: 123456789.12345679 is the nearest double.
    123456789.12345679,
  ),
);

/**
 * Date-time text laid out as `YYYY-MM-DD{sep}HH:MM:SS.sss{end}` (ISO's `T`…`Z`, or ClickHouse's
 * ` `), each field drawn from a range a little wider than the valid one: fast parsers of one
 * layout are checked against full ones on it.
 */
export const looseDateTimes = (sep: "T" | " ", end: "Z" | "") =>
  fc
    .tuple(
      fc.integer({ min: 0, max: 9999 }),
      fc.integer({ min: 0, max: 13 }),
      fc.integer({ min: 0, max: 32 }),
      fc.integer({ min: 0, max: 25 }),
      fc.integer({ min: 0, max: 61 }),
      fc.integer({ min: 0, max: 61 }),
      fc.integer({ min: 0, max: 999 }),
    )
    .map(([y, mo, d, h, mi, s, ms]) => {
      const p = (n: number, w: number) => String(n).padStart(w, "0");
      return `${p(y, 4)}-${p(mo, 2)}-${p(d, 2)}${sep}${p(h, 2)}:${p(mi, 2)}:${p(s, 2)}.${p(ms, 3)}${end}`;
    });

const pad = (n: number, w = 2) => String(n).padStart(w, "0");
const DAY_MS = 86_400_000;
export const timestamps = fc.oneof(
  // From before 2000 to past the window's end (now + 24 h). Drawn as an offset from now, so
  // that a seed replays the same values relative to the clock on any day.
  fc
    .integer({ min: -(Date.now() - Date.UTC(1999, 11, 31)), max: 3 * DAY_MS })
    .map((offset) => new Date(Date.now() + offset).toISOString()),
  fc
    .integer({ min: -2 * DAY_MS, max: 2 * DAY_MS })
    .map((offset) => new Date(Date.now() + offset).toISOString()),
  fc
    .record({
      y: fc.integer({ min: 1999, max: 2030 }),
      mo: fc.integer({ min: 0, max: 13 }),
      d: fc.integer({ min: 0, max: 32 }),
      h: fc.integer({ min: 0, max: 24 }),
      mi: fc.integer({ min: 0, max: 60 }),
      s: fc.integer({ min: 0, max: 60 }),
      frac: fc.option(fc.stringMatching(/^\d{1,9}$/), { nil: "" }),
      sep: fc.constantFrom(".", ","),
      t: fc.constantFrom("T", "t", " "),
      zone: fc.oneof(
        fc.constantFrom("Z", "z", ""),
        fc
          .record({
            sign: fc.constantFrom("+", "-"),
            hh: fc.integer({ min: 0, max: 19 }),
            mm: fc.integer({ min: 0, max: 99 }),
            form: fc.constantFrom("hh", "hhmm", "hh:mm"),
          })
          .map(({ sign, hh, mm, form }) =>
            form === "hh"
              ? `${sign}${pad(hh)}`
              : form === "hhmm"
                ? `${sign}${pad(hh)}${pad(mm)}`
                : `${sign}${pad(hh)}:${pad(mm)}`,
          ),
      ),
    })
    .map(
      (x) =>
        `${x.y}-${pad(x.mo)}-${pad(x.d)}${x.t}${pad(x.h)}:${pad(x.mi)}:${pad(x.s)}${x.frac ? x.sep + x.frac : ""}${x.zone}`,
    ),
  oddStrings,
  numbers,
);

const absent = fc.constant(undefined);
const limitValue = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 10_000_000 }) },
  { weight: 2, arbitrary: numbers },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: absent },
);
const creditValue = fc.oneof(
  { weight: 4, arbitrary: fc.double({ min: -1000, max: 1000, noNaN: true }) },
  { weight: 2, arbitrary: numbers },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: absent },
);
const eachOf = <T>(keys: readonly string[], arb: fc.Arbitrary<T>) =>
  fc.record(Object.fromEntries(keys.map((key) => [key, arb])));

/** Mostly valid reports, as the client sends them, with odd but legal values. */
export const mostly = <T, U>(usual: fc.Arbitrary<T>, odd: fc.Arbitrary<U>) =>
  fc.oneof({ weight: 3, arbitrary: usual }, { weight: 1, arbitrary: odd });
export const reports = fc.record({
  app: mostly(fc.constantFrom("chat", "  padded  ", null, "", undefined), oddStrings),
  provider: mostly(fc.constantFrom("openai", " Anthropic ", "GROQ", "azure-openai"), oddStrings),
  model: mostly(fc.constantFrom("gpt-4o", "meta-llama/llama-3.3-70b", null, undefined), oddStrings),
  timestamp: mostly(
    fc.constantFrom(undefined, null, new Date().toISOString(), "2025-01-01T00:00:00+05:30"),
    timestamps,
  ),
  limits: eachOf(LIMIT_FIELDS, limitValue),
  credits: fc.oneof(absent, fc.constant(null), eachOf(CREDIT_FIELDS, creditValue)),
});

/** Always tried, whatever the seed: the corners of every range, odd but legal text. */
export const EDGE_CASES: Record<string, unknown>[] = [
  [-(2 ** 63) + 1024, 2 ** 63 - 1024, 2 ** 53 + 2, -0.5, 2.5, 1e18],
  [0, 1, -1, 9_007_199_254_740_991, -1e18, 0.49999999999999994],
].map((values, i) => ({
  app: i ? "a\u0000b \u2028 \uFFFF 'quoted' \\ \"" : "😀".repeat(128),
  provider: i ? " İSTANBUL " : "x".repeat(64),
  model: i ? "e\u0301\u202E" : "m".repeat(256),
  timestamp: i ? "2024-02-29T23:59:59.999999999-18:00" : "2000-01-01T00:00:00,5+00:00",
  limits: Object.fromEntries(LIMIT_FIELDS.map((f, j) => [f, values[j]])),
  credits: i
    ? { credits_limit: 9.99e20, credits_remaining: -9.99e20, request_cost: 1e-13 }
    : { credits_limit: 123456789.12345679, credits_remaining: 0.1, request_cost: 5e-324 },
}));
// Found by this test: accepted once, and stored wrong or at the wrong time.
EDGE_CASES.push(
  // -2^63 travels as -9223372036854776000, which ClickHouse stored as +9223372036854775616.
  { provider: "openai", limits: { requests_remaining: -(2 ** 63) } },
  // An offset's minutes run to 59: "-00:60" was taken as one hour.
  { provider: "openai", limits: {}, timestamp: "2024-01-01T00:00:00-00:60" },
);

// ---- mutations ----------------------------------------------------------------------------

const PATHS = [
  ["provider"],
  ["app"],
  ["model"],
  ["timestamp"],
  ["limits"],
  ["credits"],
  ...LIMIT_FIELDS.map((f) => ["limits", f]),
  ...CREDIT_FIELDS.map((f) => ["credits", f]),
  ["extra"],
  ["limits", "extra"],
  ["credits", "extra"],
];
const paths = fc.constantFrom<string[]>(...PATHS);
export const junk = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  numbers,
  oddStrings,
  fc.constantFrom("123", "1e3", "NaN", "Infinity", "null", [], {}, [1, 2], true, false),
);

export type Mutation =
  | { kind: "remove"; path: string[] }
  | { kind: "set"; path: string[]; value: unknown }
  | { kind: "deep"; path: string[]; depth: number }
  | { kind: "huge"; path: string[]; size: number }
  | { kind: "forbidden"; path: string[]; key: string }
  | { kind: "duplicate"; field: string; value: unknown; first: boolean };

export const mutations: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("remove" as const), path: paths }),
  fc.record({ kind: fc.constant("set" as const), path: paths, value: junk }),
  fc.record({
    kind: fc.constant("deep" as const),
    path: paths,
    depth: fc.integer({ min: 25, max: 40 }),
  }),
  fc.record({
    kind: fc.constant("huge" as const),
    path: paths,
    size: fc.constantFrom(20_000, 31_000, 40_000),
  }),
  fc.record({
    kind: fc.constant("forbidden" as const),
    path: fc.constantFrom<string[]>(["x"], ["limits", "x"], ["credits", "x"], ["extra", "x"]),
    key: fc.constantFrom("__proto__", "constructor", "prototype", "\\u005f_proto__"),
  }),
  fc.record({
    kind: fc.constant("duplicate" as const),
    field: fc.constantFrom("provider", "limits", "app", "timestamp", "model"),
    value: junk,
    first: fc.boolean(),
  }),
);

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The object's JSON text with the mutations applied (some only exist as text). */
export function render(report: Record<string, unknown>, muts: Mutation[]): string {
  const obj = structuredClone(report) as Record<string, unknown>;
  const replacements: [string, string][] = [];
  const parentOf = (path: string[]) => {
    let node: unknown = obj;
    for (const step of path.slice(0, -1)) {
      if (!isPlain(node)) return null;
      if (node[step] === undefined) node[step] = {};
      node = node[step];
    }
    return isPlain(node) ? node : null;
  };
  muts.forEach((m, i) => {
    if (m.kind === "duplicate") {
      const placeholder = `__dup_${i}__`;
      replacements.push([`"${placeholder}"`, `"${m.field}"`]);
      const entries = Object.entries(obj);
      for (const key of Object.keys(obj)) delete obj[key];
      const added: [string, unknown][] = [[placeholder, structuredClone(m.value)]];
      for (const [key, value] of m.first ? [...added, ...entries] : [...entries, ...added]) {
        obj[key] = value;
      }
      return;
    }
    const parent = parentOf(m.path);
    const leaf = m.path[m.path.length - 1] as string;
    if (!parent) return;
    if (m.kind === "remove") delete parent[leaf];
    else if (m.kind === "set") parent[leaf] = structuredClone(m.value);
    else if (m.kind === "huge") parent[leaf] = "x".repeat(m.size);
    else if (m.kind === "deep") {
      let nested: unknown = "bottom";
      for (let d = 0; d < m.depth; d++) nested = d % 2 ? [nested] : { n: nested };
      parent[leaf] = nested;
    } else if (m.kind === "forbidden") {
      const placeholder = `__forbidden_${i}__`;
      replacements.push([`"${placeholder}"`, `"${m.key}"`]);
      parent[placeholder] = { polluted: true };
    }
  });
  let text = JSON.stringify(obj);
  for (const [from, to] of replacements) text = text.replace(from, to);
  return text;
}
