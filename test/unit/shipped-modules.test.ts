import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { expect, it } from "vitest";
import { ROOT, reachable, sourceFiles } from "../helpers/import-graph.js";

// What the build ships (src/, workers/) is what the processes run, or what package.json's
// "exports" offer to other programs (the advice client): a module neither reaches is test or
// benchmark code, and belongs under test/, bench/ or fixtures/.

const exported = Object.values(
  (
    JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      exports?: Record<string, { types: string }>;
    }
  ).exports ?? {},
).map((e) => join(ROOT, e.types));
const entries = [
  ...["src/main", "workers"].flatMap((dir) =>
    readdirSync(join(ROOT, dir)).map((f) => join(ROOT, dir, f)),
  ),
  ...exported,
];

// The page's browser code is reached from its HTML, not from a process (bin/build-page.mjs).
const BROWSER_CODE = join(ROOT, "src", "page", "client");

it("every module under src/ is reached from a process entry point (src/main, workers) or an export", () => {
  const used = reachable(entries);
  expect(used.size).toBeGreaterThan(entries.length);
  const unused = sourceFiles(join(ROOT, "src"))
    .filter((f) => !used.has(f) && !f.startsWith(BROWSER_CODE))
    .map((f) => relative(ROOT, f));
  expect(unused).toEqual([]);
});
