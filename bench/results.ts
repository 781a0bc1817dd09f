import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BenchResults } from "./run-results.js";
import { renderMarkdown } from "./render.js";

// Writes a run's results: latest.json and latest.md, and a copy of both named by the run's date
// so earlier runs stay comparable. The published reference (`--publish`) is latest.* alone: its
// history is the repository's. Commands other than `npm run bench` name their files with a
// prefix (`edge-latest.json`).

export function writeResults(
  outDir: string,
  results: BenchResults,
  publishDir: string | null = null,
): string[] {
  return writeRun(outDir, results, renderMarkdown(results), publishDir);
}

/** Writes any run's JSON and markdown under `<prefix>latest.*` and `<prefix><date>.*`. */
export function writeRun(
  outDir: string,
  results: { machine: { date: string } },
  md: string,
  publishDir: string | null = null,
  prefix = "",
): string[] {
  mkdirSync(outDir, { recursive: true });
  const stamp = results.machine.date.replace(/[:.]/g, "-");
  const json = `${JSON.stringify(results, null, 2)}\n`;
  const files: [string, string][] = [
    [`${prefix}latest.json`, json],
    [`${prefix}latest.md`, md],
    [`${prefix}${stamp}.json`, json],
    [`${prefix}${stamp}.md`, md],
  ];
  for (const [name, text] of files) writeFileSync(join(outDir, name), text);
  const written = files.map(([name]) => join(outDir, name));
  if (publishDir !== null) {
    mkdirSync(publishDir, { recursive: true });
    for (const [name, text] of files.slice(0, 2)) {
      writeFileSync(join(publishDir, name), text);
      written.push(join(publishDir, name));
    }
  }
  return written;
}
