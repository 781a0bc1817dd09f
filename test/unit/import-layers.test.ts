import { join, relative } from "node:path";
import { expect, it } from "vitest";
import { importCycles, importsOf, ROOT, sourceFiles } from "../helpers/import-graph.js";

// The folders of src/ are layers in a declared order: each may import the ones below it, never
// one above it nor a peer of its own rank (the edge, the read API and the worker share what they
// need from below them). A cycle ties two layers into one that can only be read, tested and
// changed together; an upward import is where a cycle starts. Within a folder too, and in
// workers/ and bench/, no two files import each other: a schema both a route and its query need
// lives in a module of its own (src/api/schemas/), which both import.

/** Top to bottom; layers of one rank are peers. A new folder of src/ must be placed here. */
const LAYERS: string[][] = [
  ["main"],
  ["cli"],
  ["local"],
  ["api", "edge", "worker"],
  // OTLP's spans turned into reports: the edge's, over the report and the providers' parsers.
  ["otlp"],
  // The control plane's service: what the CLI and the HTTP routes both call.
  ["control"],
  ["headroom"],
  ["alerts"],
  ["limits"],
  ["http"],
  ["queue"],
  ["clickhouse"],
  ["keys"],
  ["redis"],
  ["report"],
  ["providers"],
  ["lib"],
  ["config.ts"],
];
const rankOf = new Map(LAYERS.flatMap((peers, rank) => peers.map((l) => [l, rank] as const)));

/** Imports that go up the declared order or across to a peer, as "from -> to". */
function wrongWay(graph: Map<string, Set<string>>): string[] {
  const wrong: string[] = [];
  for (const [from, deps] of graph) {
    for (const to of deps) {
      const a = rankOf.get(from);
      const b = rankOf.get(to);
      if (a === undefined || b === undefined || b <= a) wrong.push(`${from} -> ${to}`);
    }
  }
  return wrong.sort();
}

const SRC = join(ROOT, "src");

/** `src/worker/x.ts` → `worker`; a file directly in src/ is a layer of its own. */
const layerOf = (file: string) => relative(SRC, file).split("/")[0] ?? "";

function layerGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(SRC)) {
    const from = layerOf(file);
    for (const imported of importsOf(file)) {
      const to = layerOf(imported);
      if (to === from) continue;
      const deps = graph.get(from) ?? new Set<string>();
      deps.add(to);
      graph.set(from, deps);
    }
  }
  return graph;
}

/** Every cycle, once: found from its alphabetically first layer. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const found: string[][] = [];
  const walk = (start: string, at: string, path: string[]) => {
    for (const next of graph.get(at) ?? []) {
      if (next === start) found.push([...path, start]);
      else if (!path.includes(next) && next > start) walk(start, next, [...path, next]);
    }
  };
  for (const start of graph.keys()) walk(start, start, [start]);
  return found;
}

it("finds a cycle when there is one (the check itself)", () => {
  const graph = new Map([
    ["a", new Set(["b"])],
    ["b", new Set(["c"])],
    ["c", new Set(["a"])],
  ]);
  expect(cycles(graph)).toEqual([["a", "b", "c", "a"]]);
});

it("no two folders of src/ import each other, directly or round a loop", () => {
  const graph = layerGraph();
  expect(graph.get("worker")).toContain("alerts");
  expect(cycles(graph)).toEqual([]);
});

it("finds an import that goes up or across (the check itself)", () => {
  const graph = new Map([
    ["edge", new Set(["http", "api"])],
    ["http", new Set(["edge"])],
    ["nowhere", new Set(["lib"])],
  ]);
  expect(wrongWay(graph)).toEqual(["edge -> api", "http -> edge", "nowhere -> lib"]);
});

it("every folder of src/ imports only layers below it, in the declared order", () => {
  const graph = layerGraph();
  // The order is real: the edge does import from below it.
  expect(graph.get("edge")).toContain("http");
  expect(wrongWay(graph)).toEqual([]);
});

it("finds files that import each other, a pair or round a loop (the check itself)", () => {
  const graph = new Map([
    ["route.ts", ["query.ts", "schema.ts"]],
    ["query.ts", ["schema.ts", "route.ts"]],
    ["a.ts", ["b.ts"]],
    ["b.ts", ["c.ts"]],
    ["c.ts", ["a.ts", "schema.ts"]],
    ["self.ts", ["self.ts"]],
    ["schema.ts", []],
  ]);
  expect(importCycles(graph)).toEqual([
    ["a.ts", "b.ts", "c.ts"],
    ["query.ts", "route.ts"],
    ["self.ts"],
  ]);
  expect(
    importCycles(
      new Map([
        ["route.ts", ["query.ts"]],
        ["query.ts", ["schema.ts"]],
      ]),
    ),
  ).toEqual([]);
});

it("no two files of src/, workers/ or bench/ import each other, directly or round a loop", () => {
  const files = ["src", "workers", "bench"].flatMap((dir) => sourceFiles(join(ROOT, dir)));
  const graph = new Map(
    files.map((f) => [relative(ROOT, f), importsOf(f).map((i) => relative(ROOT, i))]),
  );
  // The graph is real: a route does import its query, which imports the schema they share.
  expect(graph.get("src/api/routes/usage.ts")).toContain("src/api/queries/usage.ts");
  expect(graph.get("src/api/queries/usage.ts")).toContain("src/api/schemas/usage.ts");
  expect(graph.size).toBeGreaterThan(200);
  expect(importCycles(graph)).toEqual([]);
});
