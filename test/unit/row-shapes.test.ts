import { describe, expect, it } from "vitest";
import { rowShapes, UnknownRowShapeError } from "../../src/report/row-shapes.js";

// Rows of an older shape, mapped by column name to the current one.

const shapes = rowShapes({ 1: ["id", "a", "b"], 2: ["id", "b", "c"], 3: ["id", "b", "c", "d"] });

describe("row shapes", () => {
  it("writes the newest shape", () => {
    expect(shapes.current).toBe(3);
    expect(shapes.columns).toEqual(["id", "b", "c", "d"]);
  });

  it("leaves rows of the current shape as they are", () => {
    const rows = [["x", 1, 2, 3]];
    expect(shapes.upgrade(3, rows)).toBe(rows);
  });

  it("maps older shapes by name, null where the old shape had no such column", () => {
    expect(shapes.upgrade(1, [["x", "gone", 2]])).toEqual([["x", 2, null, null]]);
    expect(shapes.upgrade(2, [["y", 5, 6]])).toEqual([["y", 5, 6, null]]);
  });

  it("takes a payload without a version as shape 1", () => {
    expect(shapes.upgrade(undefined, [["z", "a", 7]])).toEqual([["z", 7, null, null]]);
  });

  it("refuses a shape from a newer release rather than misread it", () => {
    expect(() => shapes.upgrade(4, [["x"]])).toThrow(UnknownRowShapeError);
  });
});
