import { randomInt } from "node:crypto";
import { defineConfig } from "vitest/config";

// One fast-check seed per run, shared by every test file: taken from FC_SEED when set, so a
// failure can be replayed exactly (`FC_SEED=<seed> npx vitest run <file>`); printed on failure
// by test/helpers/fast-check-seed.ts.
const fcSeed = process.env.FC_SEED ?? String(randomInt(2 ** 31 - 1));
if (!/^-?\d+$/.test(fcSeed)) throw new Error(`FC_SEED must be an integer, not "${fcSeed}"`);
const shared = { env: { FC_SEED: fcSeed }, setupFiles: ["test/helpers/fast-check-seed.ts"] };

// Three projects: unit tests need no service; integration tests get a real Redis (and start the
// embedded ClickHouse server themselves) from the global setup; docker tests build the image and
// run it, alone and with docker compose, on a Docker engine.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          ...shared,
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          // The seeded property tests run thousands of cases: seconds on an idle machine, more on a
          // loaded one, where vitest's default 5 s failed them for their speed, not their claim.
          testTimeout: 30_000,
          // The same as integration's: vitest's --sequence.* flags (shuffle, seed) replace
          // each project's groupOrder, and projects of one group must agree on maxWorkers.
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...shared,
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/helpers/global-setup.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // Two cores: files run two at a time, each with its own processes and names.
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          ...shared,
          name: "docker",
          include: ["test/docker/**/*.test.ts"],
          // Brings up a Docker engine (a private dockerd when none answers) and the base images,
          // built offline: test/docker/engine.sh.
          globalSetup: ["test/docker/global-setup.ts"],
          testTimeout: 300_000,
          hookTimeout: 900_000,
          // Image builds and whole stacks: one file at a time, after the other projects. (Two
          // workers as the other projects have: --sequence.* flags put all projects in one group,
          // whose projects must agree on maxWorkers.)
          maxWorkers: 2,
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
