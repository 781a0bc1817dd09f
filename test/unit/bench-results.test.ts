import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { DEFAULT_OUT_DIR, PUBLISHED_DIR } from "../../bench/options.js";
import { writeResults } from "../../bench/results.js";
import type { BenchResults } from "../../bench/run-results.js";
import { ROOT } from "../helpers/import-graph.js";

// A benchmark leaves the checkout clean: every run goes to an ignored folder, and only a
// deliberate `--publish` rewrites the tracked reference.

const reference = JSON.parse(
  readFileSync(join(ROOT, PUBLISHED_DIR, "latest.json"), "utf8"),
) as BenchResults;
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "headroom-bench-results-"));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const ignored = (path: string) =>
  spawnSync("git", ["check-ignore", "-q", path], { cwd: ROOT }).status === 0;

it("runs go to a folder git ignores; the published reference is tracked", () => {
  expect(ignored(`${DEFAULT_OUT_DIR}/latest.json`)).toBe(true);
  expect(ignored(`${DEFAULT_OUT_DIR}/2026-01-01T00-00-00-000Z.md`)).toBe(true);
  expect(ignored(`${PUBLISHED_DIR}/latest.json`)).toBe(false);
});

it("a run writes latest.* and dated copies to its folder, and nothing elsewhere", () => {
  const out = tempDir();
  const written = writeResults(out, reference);
  expect(written.every((f) => f.startsWith(out))).toBe(true);
  const stamp = reference.machine.date.replace(/[:.]/g, "-");
  expect(readdirSync(out).sort()).toEqual(
    ["latest.json", "latest.md", `${stamp}.json`, `${stamp}.md`].sort(),
  );
});

it("--publish also writes the reference: latest.* alone, the same as the run's", () => {
  const out = tempDir();
  const published = tempDir();
  writeResults(out, reference, published);
  expect(readdirSync(published).sort()).toEqual(["latest.json", "latest.md"]);
  for (const name of ["latest.json", "latest.md"]) {
    expect(readFileSync(join(published, name), "utf8")).toBe(readFileSync(join(out, name), "utf8"));
  }
});
