import { defineConfig } from "vitest/config";

// Two projects: unit tests need no service; integration tests get a real Redis (and start the
// embedded ClickHouse server themselves) from the global setup.
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
    ],
  },
});
