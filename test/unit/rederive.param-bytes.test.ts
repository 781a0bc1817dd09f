import { describe, expect, it } from "vitest";
import { byParamBytes } from "../../src/clickhouse/rederive.js";
import type { WindowCells } from "../../src/clickhouse/report-windows.js";

// `headroom rederive-windows` sends a mutation's values as query parameters, in the URL, which
// ClickHouse takes up to 1 MiB: a page's changes are cut into mutations of at most 256 KiB of
// parameters, each report whole, in order.

const cells = (n: number): WindowCells => [
  Array.from({ length: n }, (_, i) => `dimension_${i}`),
  Array.from({ length: n }, () => "1m"),
  Array.from({ length: n }, () => 1_000_000),
  Array.from({ length: n }, () => 999_999),
  Array.from({ length: n }, () => "2026-11-29 10:00:00.000"),
  "anthropic@1",
];

describe("rederive's mutations", () => {
  it("carry at most 256 KiB of parameters each, every change once, in order", () => {
    const changed = Array.from({ length: 500 }, (_, i) => ({
      key: `0190a000-0000-7000-8000-${String(i).padStart(12, "0")}|2026-11-29 10:00:00.000|${"41".repeat(64)}`,
      cells: cells(16),
    }));
    const parts = byParamBytes(changed);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.flat()).toEqual(changed);
    for (const part of parts) {
      const bytes = Buffer.byteLength(
        JSON.stringify({
          keys: part.map((c) => c.key),
          ids: part.map((c) => c.key),
          cells: part.map((c) => c.cells),
        }),
      );
      expect(bytes).toBeLessThanOrEqual(256 * 1024);
    }
  });

  it("keeps a change over the bound whole, alone in its mutation", () => {
    const big = { key: "k", cells: cells(8_000) };
    expect(
      byParamBytes([{ key: "a", cells: cells(1) }, big, { key: "b", cells: cells(1) }]).map(
        (p) => p.length,
      ),
    ).toEqual([1, 1, 1]);
  });
});
