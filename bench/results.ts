import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BenchResults } from "./figures.js";
import { renderMarkdown } from "./render.js";

// Writes a run's results: latest.json and latest.md, and a copy of both named by the run's date
// so earlier runs stay comparable.

export function writeResults(outDir: string, results: BenchResults): string[] {
  mkdirSync(outDir, { recursive: true });
  const stamp = results.machine.date.replace(/[:.]/g, "-");
  const json = `${JSON.stringify(results, null, 2)}\n`;
  const md = renderMarkdown(results);
  const files: [string, string][] = [
    ["latest.json", json],
    ["latest.md", md],
    [`${stamp}.json`, json],
    [`${stamp}.md`, md],
  ];
  for (const [name, text] of files) writeFileSync(join(outDir, name), text);
  return files.map(([name]) => join(outDir, name));
}
