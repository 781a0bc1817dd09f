import { describe, expect, it } from "vitest";
import { createProgress } from "../../src/cli/import-progress.js";
import { ImportAbort, sendReports } from "../../src/cli/import-sender.js";
import { readValues, reportMaker, uuidFromForeignId } from "../../src/cli/import-source.js";

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
    const toReport = reportMaker();
    const reports = [1, 2, 3, 4].map((n) => toReport({ provider: `p${n}`, limits: {} }));
    const { counts } = await sendReports(reports, { ...opts, fetch: edge.fetch });
    expect(counts).toEqual({ total: 4, accepted: 4, duplicates: 0, refused: 0 });
    expect(edge.calls[1]?.map((r) => r.id)).toEqual([reports[1]?.id, reports[2]?.id]);
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
    const toReport = reportMaker();
    const reports = [{ provider: "a", limits: {} }, { limits: {} }].map((r) => toReport(r));
    const { counts, refusals } = await sendReports(reports, { ...opts, fetch: edge.fetch });
    expect(counts).toMatchObject({ accepted: 1, refused: 1 });
    expect(refusals).toEqual([{ index: 1, error: "invalid_report", message: "provider" }]);
    const unauthorized = fakeEdge(() => ({ status: 401, body: { error: "invalid_project_key" } }));
    await expect(sendReports(reports, { ...opts, fetch: unauthorized.fetch })).rejects.toThrow(
      ImportAbort,
    );
  });
});

describe("reading", () => {
  it("NDJSON and arrays; an export row of the original service gets a UUID of its own id", () => {
    expect(readValues('{"a":1}\nnot json\n\n{"b":2}\n')).toEqual({
      values: [{ a: 1 }, { b: 2 }],
      badLines: ["not json"],
    });
    expect(readValues(' [{"a":1}]').values).toEqual([{ a: 1 }]);
    // A byte order mark first (Windows tools), and CRLF line ends.
    expect(readValues('\uFEFF{"a":1}\r\n{"b":2}\r\n')).toEqual({
      values: [{ a: 1 }, { b: 2 }],
      badLines: [],
    });
    expect(readValues('\uFEFF[{"a":1}]').values).toEqual([{ a: 1 }]);
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
    const toReport = reportMaker();
    const report = toReport(row);
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
    expect(toReport({ id: own, provider: "x" })?.id).toBe(own);
  });

  it("a report without an id gets the same one each time its file is read: identical ones stay apart", () => {
    const file = [
      { app: "a", provider: "openai", limits: { requests_remaining: 1 } },
      { app: "a", provider: "openai", limits: { requests_remaining: 2 } },
      { app: "a", provider: "openai", limits: { requests_remaining: 1 } },
      { id: "not-a-uuid", app: "a", provider: "openai", limits: {} },
    ];
    const ids = (values: unknown[]) => {
      const toReport = reportMaker();
      return values.map((v) => toReport(v)?.id);
    };
    const first = ids(file);
    expect(new Set(first).size).toBe(4);
    for (const id of first) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab]/);
    // The same file read again, and the file with a report appended: the same ids.
    expect(ids(structuredClone(file))).toEqual(first);
    expect(ids([...file, { app: "b", provider: "x", limits: {} }]).slice(0, 4)).toEqual(first);
    // Not by position: a report's id follows its content.
    expect(ids([file[1], file[0]])).toEqual([first[1], first[0]]);
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
});
