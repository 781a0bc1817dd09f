import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createProgress } from "../../src/cli/import-progress.js";
import { type Item as FileItem, ImportFileError, readItems } from "../../src/cli/import-reader.js";
import { ImportAbort, sendReports } from "../../src/cli/import-sender.js";
import { toReport, uuidFromForeignId } from "../../src/cli/import-source.js";

// `headroom import` without an edge: a fake endpoint that answers as the batch endpoint does.

type Item = Record<string, unknown>;
type Answer = (
  items: Item[],
  call: number,
) => { status: number; body: unknown; headers?: Record<string, string> };

function fakeEdge(answer: Answer) {
  const calls: Item[][] = [];
  const fetch = (async (_url: string, init: { body: string }) => {
    const items = JSON.parse(init.body) as Item[];
    calls.push(items);
    const a = answer(items, calls.length);
    return new Response(JSON.stringify(a.body), { status: a.status, headers: a.headers });
  }) as unknown as typeof globalThis.fetch;
  return { fetch, calls };
}

const opts = { url: "http://edge", key: "k", batchSize: 3, concurrency: 1, sleep: async () => {} };
const items = (values: unknown[]): FileItem[] => values.map((value) => ({ value }));

describe("sending", () => {
  it("sends again, with the same ids, what came back unavailable or rate limited", async () => {
    const stored = new Set<string>();
    const edge = fakeEdge((items, call) => ({
      status: 207,
      body: {
        results: items.map((it, i) => {
          if (call === 1 && i === 1) return { error: "unavailable", message: "m" };
          if (call === 1 && i === 2) return { error: "rate_limited", message: "m" };
          const id = it.id as string;
          const duplicate = stored.has(id);
          stored.add(id);
          return duplicate ? { id, duplicate: true } : { id };
        }),
      },
    }));
    const values = [1, 2, 3, 4].map((n) => ({ provider: `p${n}`, limits: {} }));
    const { counts } = await sendReports(items(values), { ...opts, total: 4, fetch: edge.fetch });
    expect(counts).toEqual({ total: 4, accepted: 4, duplicates: 0, refused: 0 });
    const sent = edge.calls[0]?.map((r) => r.id);
    expect(sent).toEqual(values.slice(0, 3).map((v, i) => toReport(v, i)?.id));
    expect(edge.calls[1]?.map((r) => r.id)).toEqual([sent?.[1], sent?.[2]]);
  });

  it("splits a batch over the body limit, refuses invalid items, and stops on a bad key", async () => {
    const edge = fakeEdge((items) =>
      items.length > 1
        ? { status: 413, body: { error: "payload_too_large", message: "m" } }
        : {
            status: items[0]?.provider ? 200 : 207,
            body: {
              results: [
                items[0]?.provider
                  ? { id: items[0]?.id }
                  : { error: "invalid_report", message: "provider" },
              ],
            },
          },
    );
    const values = [{ provider: "a", limits: {} }, { limits: {} }];
    const { counts, refusals } = await sendReports(
      [...items(values), { bad: "{broken", reason: "Unexpected token" }],
      { ...opts, total: 3, fetch: edge.fetch },
    );
    expect(counts).toMatchObject({ total: 3, accepted: 1, refused: 2 });
    // The bad item is refused as it is read, before the batch is answered.
    expect(refusals).toEqual([
      {
        error: "invalid_json",
        count: 1,
        index: 2,
        message: "not JSON (Unexpected token): {broken",
      },
      { error: "invalid_report", count: 1, index: 1, message: "provider" },
    ]);
    const unauthorized = fakeEdge(() => ({ status: 401, body: { error: "invalid_project_key" } }));
    await expect(
      sendReports(items(values), { ...opts, total: 2, fetch: unauthorized.fetch }),
    ).rejects.toThrow(ImportAbort);
  });
});

/** `text` read in chunks cut at `cuts` (offsets), as a stream gives it. */
async function read(text: string, cuts: number[] = [], parse = true): Promise<FileItem[]> {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const chunks = [0, ...at].map((from, i) => text.slice(from, at[i] ?? text.length));
  const out: FileItem[] = [];
  for await (const it of readItems(chunks, { parse })) out.push(it);
  return out;
}

describe("reading", () => {
  it("NDJSON (CRLF, blank lines, no last newline) and arrays; a bad item is one item", async () => {
    expect(await read('{"a":1}\r\nnot json\n\n  \n{"b":2}')).toEqual([
      { value: { a: 1 } },
      { bad: "not json", reason: expect.any(String) },
      { value: { b: 2 } },
    ]);
    expect(await read(' [{"a":"x,]}"}, 2 ,\n{"b":[1,{"c":"\\""}]}]\n')).toEqual([
      { value: { a: "x,]}" } },
      { value: 2 },
      { value: { b: [1, { c: '"' }] } },
    ]);
    expect(await read("[]")).toEqual([]);
    expect(await read("")).toEqual([]);
    expect(await read("[1,,2]")).toEqual([
      { value: 1 },
      { bad: "", reason: "an empty element" },
      { value: 2 },
    ]);
    // A byte order mark first (Windows tools).
    expect(await read('\uFEFF{"a":1}\n')).toEqual([{ value: { a: 1 } }]);
    expect(await read('\uFEFF[{"a":1}]')).toEqual([{ value: { a: 1 } }]);
    // Only counted: items, not values.
    expect(await read('[{"a":1},{"b":2}]', [], false)).toHaveLength(2);
  });

  it("a file broken as a whole is an error, not items", async () => {
    await expect(read('[{"a":1}')).rejects.toThrow(ImportFileError);
    await expect(read('[{"a":"]"}')).rejects.toThrow(ImportFileError);
    await expect(read("[1] 2")).rejects.toThrow(ImportFileError);
  });

  it("gives the same items however the file is cut into chunks", async () => {
    // An array's elements are any JSON; NDJSON's lines are objects (reports), since a file
    // whose first line is an array is read as an array.
    const element = fc.jsonValue({ maxDepth: 3 });
    const line = fc.dictionary(fc.string(), element, { maxKeys: 4 });
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.record({ asArray: fc.constant(true), values: fc.array(element, { maxLength: 12 }) }),
          fc.record({ asArray: fc.constant(false), values: fc.array(line, { maxLength: 12 }) }),
        ),
        fc.array(fc.nat(), { maxLength: 8 }),
        async ({ asArray, values }, cuts) => {
          const text = asArray
            ? `[${values.map((v) => JSON.stringify(v)).join(",\n ")}]`
            : values.map((v) => `${JSON.stringify(v)}\r\n`).join("");
          // JSON's text of each value (JSON.parse(JSON.stringify(-0)) is 0, as the edge reads it).
          const expected = values.map((v) => ({ value: JSON.parse(JSON.stringify(v)) }));
          expect(await read(text, cuts)).toEqual(expected);
        },
      ),
    );
  });

  it("an id for every report: its own UUID, its export row's, else its content's and place's", () => {
    const row = {
      id: "clx0abc",
      projectId: "p",
      app: "default",
      provider: "openai",
      model: null,
      timestamp: "2026-01-01T00:00:00.000Z",
      limits: { requests_limit: 1 },
      createdAt: "2026-01-01T00:00:01.000Z",
    };
    const report = toReport(row, 0);
    expect(report).toEqual({
      id: uuidFromForeignId("delimiter", "clx0abc"),
      app: "default",
      provider: "openai",
      model: null,
      timestamp: "2026-01-01T00:00:00.000Z",
      limits: { requests_limit: 1 },
    });
    expect(report?.id).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    const own = "5b0e8a1c-2d3f-4e5a-9b6c-7d8e9f0a1b2c";
    expect(toReport({ id: own, provider: "x" }, 7)?.id).toBe(own);
    expect(toReport(5, 0)).toBeNull();
    // Without one: the same content at the same place, the same id (a file read again, or
    // with reports appended); identical reports at two places, two ids.
    const plain = { app: "a", provider: "openai", limits: { requests_remaining: 1 } };
    const id = toReport(plain, 3)?.id;
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab]/);
    expect(toReport(structuredClone(plain), 3)?.id).toBe(id);
    expect(toReport(plain, 4)?.id).not.toBe(id);
    expect(toReport({ ...plain, app: "b" }, 3)?.id).not.toBe(id);
    expect(toReport({ ...plain, id: "not-a-uuid" }, 3)?.id).not.toBe(id);
  });
});

describe("progress", () => {
  it("a bar redrawn in place on a terminal, plain lines otherwise", () => {
    let t = 0;
    const out: string[] = [];
    const tty = createProgress({ write: (s) => out.push(s), tty: true, now: () => t });
    t = 2_000;
    tty.update({ total: 100, accepted: 40, duplicates: 0, refused: 10 });
    expect(out[0]).toBe(
      "\r[############------------] 50% 50/100  25 reports/s  accepted 40  refused 10  ETA 2s\x1b[K",
    );
    const lines: string[] = [];
    const plain = createProgress({ write: (s) => lines.push(s), tty: false, now: () => t });
    t = 3_000;
    plain.update({ total: 100, accepted: 50, duplicates: 0, refused: 0 });
    plain.update({ total: 100, accepted: 60, duplicates: 0, refused: 0 });
    expect(lines).toEqual([
      "import: 50/100 reports, accepted 50, refused 0, 50 reports/s, ETA 1s\n",
    ]);
  });

  it("off a terminal, the closing line is printed once, also when the last update printed it", () => {
    let t = 0;
    const lines: string[] = [];
    const plain = createProgress({ write: (s) => lines.push(s), tty: false, now: () => t });
    t = 1_000;
    const done = { total: 10, accepted: 9, duplicates: 0, refused: 1 };
    plain.update(done);
    plain.finish(done);
    expect(lines).toEqual(["import: 10/10 reports, accepted 9, refused 1, 10 reports/s, ETA 0s\n"]);
    // Figures moved on since the last line: the closing line says where it ended.
    t = 0;
    const later = createProgress({ write: (s) => lines.push(s), tty: false, now: () => t });
    t = 1_000;
    later.update({ total: 10, accepted: 5, duplicates: 0, refused: 0 });
    later.finish(done);
    expect(lines.slice(1)).toEqual([
      "import: 5/10 reports, accepted 5, refused 0, 5 reports/s, ETA 1s\n",
      "import: 10/10 reports, accepted 9, refused 1, 10 reports/s, ETA 0s\n",
    ]);
  });
});
