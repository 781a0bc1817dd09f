import { defineConfig } from "vitest/config";

// Three projects: unit tests need no service; integration tests get a real Redis (and start the
// embedded ClickHouse server themselves) from the global setup; docker tests build the image and
// run it, alone and with docker compose, on a Docker engine.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
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
          name: "docker",
          include: ["test/docker/**/*.test.ts"],
          // Brings up a Docker engine (a private dockerd when none answers) and the base images,
          // built offline: test/docker/engine.sh.
          globalSetup: ["test/docker/global-setup.ts"],
          testTimeout: 300_000,
          hookTimeout: 900_000,
          // Image builds and whole stacks: one file at a time, after the other projects.
          maxWorkers: 1,
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
