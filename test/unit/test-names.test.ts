import { readdirSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { expect, it } from "vitest";
import { ROOT, sourceFiles } from "../helpers/import-graph.js";

// A unit test is found by the module it tests (docs/contributing.md, "Tests"): `x.test.ts` tests
// the module named x, `x.<aspect>.test.ts` one aspect of it. A module is named by its file name;
// when files of src/ and workers/ share one, by its folder and file (`routes-reports`, and
// `edge-routes-metrics` when the folder is shared too); a module of bench/ is `bench-<file>`.
// The tests of several modules, or of the repository itself, are the short list below.

/** Unit tests that test no one module. */
const ACROSS_MODULES = [
  "alerts-evaluate", // the alert evaluation as a whole: batch, series, rules and state
  "client-package", // package.json's headroom/client entry and the client's imports
  "compose", // docker-compose.yml against the config schema
  "docs-configuration", // docs/configuration.md against the config schema
  "docs-links", // every link of the docs resolves
  "docs-prometheus", // docs/prometheus.md's table against the exporter's families
  "engine-users", // the container engine's users (test/docker)
  "headroom-windows", // windows through the headroom view, the exporter and the alerts
  "import-layers", // the layers of src/ import one way
  "lockfile", // package-lock.json against npm ci
  "providers-property", // every provider's parser against any casing, junk and sentinels
  "quota-store-model", // the quota script's model in memory (test/helpers) against the cases
  "read-api-core", // the read API's pure parts: ranges, cursors, CSV, the query cache
  "shipped-modules", // every module of src/ is reached from an entry point
  "test-deps", // bin/test-deps.sh
  "test-names", // this file
];

/** Every module's test name, as the rule above names it. */
function moduleNames(files: string[]): Set<string> {
  const byFile = new Map<string, string[]>();
  for (const f of files) {
    const name = basename(f, ".ts");
    byFile.set(name, [...(byFile.get(name) ?? []), f]);
  }
  const names = new Set<string>();
  for (const [name, same] of byFile) {
    for (const f of same) {
      const parts = relative(ROOT, f).slice(0, -3).split("/");
      // The fewest trailing folders that tell this file from the others of its name.
      for (let k = 1; k <= parts.length; k++) {
        const tail = (p: string) => p.slice(0, -3).split("/").slice(-k).join("-");
        const own = tail(relative(ROOT, f));
        if (same.every((g) => g === f || tail(relative(ROOT, g)) !== own)) {
          names.add(k === 1 ? name : own);
          break;
        }
      }
    }
  }
  return names;
}

it("names every unit test after the module it tests, or lists it as a test across modules", () => {
  const modules = moduleNames([
    ...sourceFiles(join(ROOT, "src")),
    ...sourceFiles(join(ROOT, "workers")),
  ]);
  for (const f of readdirSync(join(ROOT, "bench")).filter((f) => f.endsWith(".ts")))
    modules.add(`bench-${basename(f, ".ts")}`);
  const unnamed = readdirSync(join(ROOT, "test/unit"))
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => f.split(".")[0] as string)
    .filter((m) => !modules.has(m) && !ACROSS_MODULES.includes(m));
  expect(unnamed).toEqual([]);
});

it("names a module by its folder too when another file has its name", () => {
  const names = moduleNames(
    [
      "src/api/routes/reports.ts",
      "src/api/queries/reports.ts",
      "src/edge/routes/metrics.ts",
      "src/api/routes/metrics.ts",
      "src/worker/metrics.ts",
      "src/config.ts",
    ].map((f) => join(ROOT, f)),
  );
  expect([...names].sort()).toEqual([
    "api-routes-metrics",
    "config",
    "edge-routes-metrics",
    "queries-reports",
    "routes-reports",
    "worker-metrics",
  ]);
});
