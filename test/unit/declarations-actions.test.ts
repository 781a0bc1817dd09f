import { describe, expect, it } from "vitest";
import { AUDIT_SIDE_BYTES, declarationChange } from "../../src/control/declarations-actions.js";

// What the audit log says of a change of declarations: the counts, what left and what came,
// bounded so that a project's largest sets, replaced back and forth, cannot fill its log.

const limit = (model: string, n = 60) => ({
  provider: "bedrock",
  model,
  dimension: "requests",
  window: "1m",
  limit: n,
});

describe("the audit of a declarations change", () => {
  it("names what left and what came, not what stayed", () => {
    const before = [limit("a"), limit("b")];
    const after = [limit("b"), limit("a", 70), limit("c")];
    expect(declarationChange(before, after)).toEqual({
      before: { count: 2, removed: [limit("a")] },
      after: { count: 3, added: [limit("a", 70), limit("c")] },
    });
  });

  it(`shows at most ${AUDIT_SIDE_BYTES} bytes of entries a side, and counts the rest`, () => {
    expect(AUDIT_SIDE_BYTES).toBe(4_096);
    const many = Array.from({ length: 200 }, (_, i) => limit(`model-${"x".repeat(50)}-${i}`));
    const change = declarationChange(many, []);
    expect(JSON.stringify(change.before.removed).length).toBeLessThanOrEqual(AUDIT_SIDE_BYTES);
    expect(change.before.removed.length + (change.before.removed_not_shown ?? 0)).toBe(200);
    expect(change.before.removed_not_shown).toBeGreaterThan(0);
    expect(change.after).toEqual({ count: 0, added: [] });
  });
});
