import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

// The repository's TypeScript modules and their relative imports, read from the files.

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");

export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith(".ts") ? [path] : [];
  });
}

/** The files `file` imports by a relative path (static or dynamic import), as `.ts` paths. */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:from |import\()"(\.{1,2}\/[^"]+)"/g)]
    .map(([, spec]) => normalize(join(dirname(file), (spec as string).replace(/\.js$/, ".ts"))))
    .filter((path) => existsSync(path));
}

/** Every module reachable from `entries` through relative imports. */
export function reachable(entries: string[]): Set<string> {
  const seen = new Set<string>();
  const stack = [...entries];
  for (let file = stack.pop(); file !== undefined; file = stack.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    stack.push(...importsOf(file));
  }
  return seen;
}

/**
 * The groups of files that import each other, directly or round a loop (each group's files all
 * reach one another): the strongly connected components of more than one file, or of one file
 * that imports itself. Each group sorted, the groups by their first file.
 */
export function importCycles(graph: Map<string, Iterable<string>>): string[][] {
  // Tarjan's algorithm, iterative so that a deep chain of imports cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const groups: string[][] = [];
  let next = 0;
  for (const root of graph.keys()) {
    if (index.has(root)) continue;
    const work: [string, Iterator<string>][] = [];
    const enter = (v: string) => {
      index.set(v, next);
      low.set(v, next++);
      stack.push(v);
      onStack.add(v);
      work.push([v, (graph.get(v) ?? [])[Symbol.iterator]()]);
    };
    enter(root);
    while (work.length > 0) {
      const [v, deps] = work[work.length - 1] as [string, Iterator<string>];
      const step = deps.next();
      if (!step.done) {
        const w = step.value;
        if (!index.has(w)) enter(w);
        else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent[0], Math.min(low.get(parent[0]) ?? 0, low.get(v) ?? 0));
      if (low.get(v) !== index.get(v)) continue;
      const group: string[] = [];
      for (let w = stack.pop(); w !== undefined; w = stack.pop()) {
        onStack.delete(w);
        group.push(w);
        if (w === v) break;
      }
      const selfImport = [...(graph.get(v) ?? [])].includes(v);
      if (group.length > 1 || selfImport) groups.push(group.sort());
    }
  }
  return groups.sort((a, b) => ((a[0] ?? "") < (b[0] ?? "") ? -1 : 1));
}
