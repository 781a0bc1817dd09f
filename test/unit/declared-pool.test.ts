import { describe, expect, it } from "vitest";
import type { DeclaredPool } from "../../src/providers/declared-limit.js";
import { poolKeyOf } from "../../src/report/pool-key.js";
import {
  declaredPoolIndex,
  unplacedProject,
  withDeclaredPool,
} from "../../src/report/declared-pool.js";
import { fromRow, REPORT_COLUMNS, type ReportRow } from "../../src/report/report-schema.js";
import { createPoolPlacement } from "../../src/worker/declared-pools.js";
import { sampleRow } from "../../fixtures/sample-reports.js";

// Step 3 of docs/pools.md: a row that names neither an account nor a pool takes the pool its
// project declared for its app and provider; every other row is left as it is.

const col = (name: string) => REPORT_COLUMNS.indexOf(name as (typeof REPORT_COLUMNS)[number]);

function row(fields: {
  project?: string;
  app?: string;
  provider?: string;
  account?: string;
  pool?: string;
}) {
  const r = sampleRow(1, fields.project ?? "p1").slice();
  r[col("app")] = fields.app ?? "chat";
  r[col("provider")] = fields.provider ?? "openai";
  r[col("account")] = fields.account ?? null;
  r[col("pool")] = fields.pool ?? null;
  return r;
}

const POOLS: DeclaredPool[] = [
  { provider: "openai", label: "openai-prod", apps: ["chat", "agent"] },
  { provider: "groq", label: "groq-prod", apps: ["chat"] },
];
const index = declaredPoolIndex(POOLS);

describe("a declared pool on a row", () => {
  it("gives a row with neither account nor pool the label of its app's pool of its provider", () => {
    const placed = withDeclaredPool(row({ app: "agent" }), index);
    expect(fromRow(placed).pool).toBe("openai-prod");
    expect(poolKeyOf(placed)).toBe("l:openai-prod");
    expect(fromRow(withDeclaredPool(row({ provider: "groq" }), index)).pool).toBe("groq-prod");
  });

  it("leaves a row whose provider named an account, or whose client sent a pool", () => {
    expect(unplacedProject(row({ account: "a".repeat(32) }))).toBeNull();
    expect(unplacedProject(row({ pool: "mine" }))).toBeNull();
    expect(unplacedProject(row({ project: "p9" }))).toBe("p9");
  });

  it("leaves an app of no pool, and an app pooled for another provider only", () => {
    const rag = row({ app: "rag" });
    expect(withDeclaredPool(rag, index)).toBe(rag);
    const agentOnGroq = row({ app: "agent", provider: "groq" });
    expect(withDeclaredPool(agentOnGroq, index)).toBe(agentOnGroq);
  });

  it("never changes the row it was given (a job's data)", () => {
    const r = row({});
    const before = [...r];
    withDeclaredPool(r, index);
    expect(r).toEqual(before);
  });
});

describe("the worker's placement of a job's rows", () => {
  const asked: string[] = [];
  const place = createPoolPlacement({
    async forProject(project) {
      asked.push(project);
      return project === "p1" ? { limits: [], pools: POOLS } : { limits: [], pools: [] };
    },
  });

  it("places each project's rows by its own declarations, asking once per project", async () => {
    asked.length = 0;
    const rows: ReportRow[] = [
      row({ project: "p1", app: "chat" }),
      row({ project: "p2", app: "chat" }),
      row({ project: "p1", app: "agent", account: "b".repeat(32) }),
      row({ project: "p1", app: "agent" }),
    ];
    const placed = (await place(rows)).map((r) => fromRow(r).pool ?? null);
    expect(placed).toEqual(["openai-prod", null, null, "openai-prod"]);
    expect(asked.sort()).toEqual(["p1", "p2"]);
  });

  it("asks nothing for rows that all name an account or a pool", async () => {
    asked.length = 0;
    const rows = [row({ pool: "x" }), row({ account: "c".repeat(32) })];
    expect(await place(rows)).toBe(rows);
    expect(asked).toEqual([]);
  });
});
