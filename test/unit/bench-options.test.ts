import { describe, expect, it } from "vitest";
import { OptionsError, parseBenchOptions } from "../../bench/options.js";

describe("bench options", () => {
  it("has the documented defaults", () => {
    const o = parseBenchOptions([], "/repo");
    expect(o).toMatchObject({
      durationS: 15,
      connections: 512,
      rate: 10_000,
      workers: 1,
      keys: 20,
      edges: 1,
      shards: null,
      ackReplicas: 0,
      quick: false,
      profile: false,
      outDir: "/repo/bench/runs",
      publishDir: null,
    });
  });

  it("--publish also writes the tracked reference, bench/results", () => {
    expect(parseBenchOptions(["--publish"], "/repo")).toMatchObject({
      outDir: "/repo/bench/runs",
      publishDir: "/repo/bench/results",
    });
  });

  it("--quick shortens the phases, explicit options still win", () => {
    const quick = parseBenchOptions(["--quick"], "/repo");
    expect(quick?.durationS).toBeLessThan(15);
    expect(quick?.ceilingS).toBeLessThan(quick?.durationS ?? 0);
    expect(quick?.drainTimeoutS).toBeLessThan(60);
    expect(quick?.warmupS).toBeLessThan(parseBenchOptions([], "/repo")?.warmupS ?? 0);
    const explicit = parseBenchOptions(["--quick", "--duration", "7", "--rate", "500"], "/repo");
    expect(explicit).toMatchObject({ quick: true, durationS: 7, rate: 500 });
  });

  it("reads every option and resolves --out against the working directory", () => {
    const o = parseBenchOptions(
      ["--connections", "8", "--workers", "2", "--keys", "5", "--out", "tmp/x", "--profile"],
      "/repo",
    );
    expect(o).toMatchObject({
      connections: 8,
      workers: 2,
      keys: 5,
      profile: true,
      outDir: "/repo/tmp/x",
    });
  });

  it("reads the scale-out options", () => {
    const o = parseBenchOptions(
      ["--edges", "2", "--workers", "3", "--shards", "4", "--ack-replicas", "1"],
      "/repo",
    );
    expect(o).toMatchObject({ edges: 2, workers: 3, shards: 4, ackReplicas: 1 });
    expect(parseBenchOptions(["--ack-replicas", "0"], "/repo")?.ackReplicas).toBe(0);
    expect(() => parseBenchOptions(["--ack-replicas", "-1"])).toThrow(/--ack-replicas/);
    expect(() => parseBenchOptions(["--ack-replicas", ""])).toThrow(/--ack-replicas/);
    expect(() => parseBenchOptions(["--shards", "0"])).toThrow(/--shards/);
    expect(() => parseBenchOptions(["--edges", "0"])).toThrow(/--edges/);
    // Every edge has a wrk of its own with at least one connection.
    expect(() => parseBenchOptions(["--edges", "4", "--connections", "3"])).toThrow(
      /--connections \(3\) must be at least --edges \(4\)/,
    );
  });

  it("--only clickhouse runs the views' cost alone; any other --only is refused", () => {
    expect(parseBenchOptions([], "/repo")?.only).toBeNull();
    expect(parseBenchOptions(["--only", "clickhouse"], "/repo")?.only).toBe("clickhouse");
    expect(() => parseBenchOptions(["--only", "edge"])).toThrow(/--only must be clickhouse/);
  });

  it("refuses bad values and unknown options, and returns null for --help", () => {
    expect(() => parseBenchOptions(["--duration", "0"])).toThrow(OptionsError);
    expect(() => parseBenchOptions(["--workers", "1.5"])).toThrow(/--workers/);
    expect(() => parseBenchOptions(["--connections", "many"])).toThrow(OptionsError);
    expect(() => parseBenchOptions(["--bogus"])).toThrow(OptionsError);
    expect(parseBenchOptions(["--help"])).toBeNull();
  });
});
