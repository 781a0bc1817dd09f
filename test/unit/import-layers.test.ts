import { join, relative } from "node:path";
import { expect, it } from "vitest";
import { importsOf, ROOT, sourceFiles } from "../helpers/import-graph.js";

// The folders of src/ are layers: each may import the ones below it, never one that imports it
// back. A cycle (the ingest worker feeding the alerts, the alerts reaching into the worker for a
// type) ties two layers into one that can only be read, tested and changed together.

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
