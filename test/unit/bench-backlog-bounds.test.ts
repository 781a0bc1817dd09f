import { describe, expect, it } from "vitest";
import { backlogBounds } from "../../bench/backlog-bounds.js";

// The arithmetic behind docs/operations.md's backlog sizing table (bench/backlog-sizing.ts measures).

const limits = { maxJobs: 200_000, memoryBudgetBytes: 1_800 * 1024 ** 2 };

describe("backlog bounds", () => {
  it("at a low rate, one report per job: the job count binds", () => {
    const b = backlogBounds({ rate: 100, reportsPerJob: 1, bytesPerReport: 1_500 }, limits);
    expect(b.secondsToJobs).toBe(2_000);
    expect(b.binds).toBe("jobs");
    expect(b.seconds).toBe(2_000);
  });

  it("at a high rate, full jobs: the memory binds", () => {
    const b = backlogBounds({ rate: 10_000, reportsPerJob: 400, bytesPerReport: 300 }, limits);
    expect(b.secondsToJobs).toBe(8_000);
    expect(b.secondsToMemory).toBeCloseTo(629.1, 1);
    expect(b.binds).toBe("memory");
    expect(b.seconds).toBe(b.secondsToMemory);
  });
});
