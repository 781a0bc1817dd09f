import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { createAlertsMetrics } from "../../src/alerts/metrics.js";
import { createEdgeMetrics } from "../../src/edge/metrics.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { ROOT } from "../helpers/import-graph.js";

// The shipped alert rules (ops/prometheus/): valid for Prometheus, firing as their tests say
// (Debian's `prometheus` package brings promtool), and written against metrics the processes
// really export.

const DIR = join(ROOT, "ops/prometheus");

function promtool(...args: string[]) {
  const run = spawnSync("promtool", args, { cwd: DIR, encoding: "utf8" });
  if (run.error) {
    throw new Error(
      `promtool is needed (${run.error.message}): apt-get install prometheus, or run npm test as root`,
    );
  }
  return { code: run.status, output: `${run.stdout}${run.stderr}` };
}

it("promtool check rules: the rules file is valid", () => {
  const { code, output } = promtool("check", "rules", "headroom-rules.yml");
  expect(code, output).toBe(0);
  expect(output).toMatch(/SUCCESS: \d+ rules found/);
});

it("promtool test rules: each alert fires on its failure and stays quiet otherwise", () => {
  const { code, output } = promtool("test", "rules", "headroom-rules.test.yml");
  expect(code, output).toBe(0);
});

it("every headroom_ metric the rules use is one a process exports", async () => {
  const exported = new Set<string>();
  for (const { registry } of [createEdgeMetrics(), createWorkerMetrics(), createAlertsMetrics()]) {
    for (const m of await registry.getMetricsAsJSON()) exported.add(m.name);
  }
  const rules = readFileSync(join(DIR, "headroom-rules.yml"), "utf8");
  const used = new Set(rules.match(/\bheadroom_[a-z_]+\b/g));
  expect(used.size).toBeGreaterThan(5);
  expect([...used].filter((name) => !exported.has(name))).toEqual([]);
});
