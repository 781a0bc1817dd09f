import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MIGRATIONS, type MigrationContext } from "../../src/clickhouse/migrations.js";
import { REPORT_COLUMNS } from "../../src/report/report-schema.js";
import { ROW_SHAPE_HISTORY, ROW_SHAPES } from "../../src/report/row-shapes.js";

// Released migrations and row shapes are frozen: a database that applied a migration never runs
// it again, and queued jobs and manifests keep the shape they were written in. Each one's hash is
// checked in here once it is released; editing one fails this test. A schema change is a new
// migration (and a new report field a new row shape): add it, and its hash below.

const single: MigrationContext = { db: "headroom", retentionDays: 400 };
const cluster: MigrationContext = { ...single, cluster: "analytics" };

/** The DDL of a migration, single-node and cluster text, with its backfill. */
function ddlHash(version: number): string {
  const m = MIGRATIONS.find((x) => x.version === version);
  if (!m) return "(missing)";
  const text = [single, cluster].flatMap((ctx) => [
    ...m.statements(ctx),
    ...(m.backfill?.(ctx) ?? []),
  ]);
  return createHash("sha256").update(JSON.stringify(text)).digest("hex");
}

const FROZEN_MIGRATIONS: Record<number, string> = {
  1: "1357f6d030cd0623da8df93bf87ba6ad3fc8deca569dbb08d6d7c53161a47572",
  2: "0f6713a140a30d4f9b8a04f3e440fae645e955852649c60e872c3b90cfe465d9",
  3: "73a18920918ddb4cc4ac8371259044388a1e235ffabf832336c20911685532ea",
  4: "f15506b2094462042ef7c9b0b7cab0b4f8974fd23b68a3310a997a25090d7c99",
  5: "76f763f9d4851030adf23fde6372c7a89a7e43b87001ca4d2aea5cbf38648232",
  6: "f45b2e6934a92b4a3811d0cc001d954b3b8fa15438d32b4043d8aed1fba24ddd",
  7: "0d7411baf85ed00998bad8c409e2d26d57288695945ac16d29bd88b62aa98ea0",
  8: "4270fdf55cd1914ff19fcebbabe680aa9554b0a9f8a123fcecfd79c6d970a999",
  9: "efe48e60a6c64bde0d5dee558af0ce51f15e1ccda5438ca5c9cdc896c51f9d41",
  10: "ec77a6714fb3727291c681e9302f858046822fb9b903af043934c1d927544a6e",
  11: "804b3da989823b96f5a51193bec3ae51ca9f0550468ac6eb7d0959a71f9b350c",
  12: "7e306411b6721e77b328b656f5d7bf36e55aedc627f4151aae5c58d13cec06cf",
  13: "b6ccf805619c84f208322106f585b286952eca83ed96ea0d62023879ad5acd48",
  14: "3033769d2cd09ff478c1c9046338b0fcdae1808db47604521464ee50a0eacacc",
};

const FROZEN_SHAPES: Record<number, string> = {
  1: "39c3c158ced980d8227d1b3d0393d75e90c1f9011346a5e3d0db3f5317e06c44",
  2: "d261859eb8313e1ece469c396f9153f0c53bdc4118742a56a6c474a0cea3c094",
  3: "03d42ac7bb03906b56e6fc431c9e24f15ba48886137cdf1b0fba027b85588e95",
  4: "aa3364938143d112c19c3ef0cc7a97e62bd09c6a5ec8db963c92a5220d4f327f",
};

const shapeHash = (v: number) =>
  createHash("sha256").update(JSON.stringify(ROW_SHAPE_HISTORY[v])).digest("hex");

describe("frozen migrations", () => {
  it("has every released migration, with the DDL it was released with", () => {
    for (const [version, hash] of Object.entries(FROZEN_MIGRATIONS)) {
      expect(ddlHash(Number(version)), `migration ${version} changed: add a new one instead`).toBe(
        hash,
      );
    }
  });

  it("has a checked-in hash for every migration, numbered 1, 2, 3… in order", () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    for (const m of MIGRATIONS) {
      expect(FROZEN_MIGRATIONS[m.version], `migration ${m.version}: add its hash`).toBeDefined();
    }
  });

  it("keeps the DDL apart from the live report schema: every stored field is spelled out", () => {
    const ddl = MIGRATIONS.flatMap((m) => m.statements(single)).join("\n");
    for (const column of REPORT_COLUMNS) {
      expect(ddl, `no migration adds the column ${column}`).toMatch(
        new RegExp(`(\\n\\s+|ADD COLUMN IF NOT EXISTS )${column} \\w`),
      );
    }
  });
});

describe("frozen row shapes", () => {
  it("keeps every released shape as it was", () => {
    for (const [version, hash] of Object.entries(FROZEN_SHAPES)) {
      expect(shapeHash(Number(version)), `row shape ${version} changed: add a new one`).toBe(hash);
    }
    for (const version of Object.keys(ROW_SHAPE_HISTORY)) {
      expect(FROZEN_SHAPES[Number(version)], `row shape ${version}: add its hash`).toBeDefined();
    }
  });

  it("writes the report schema's columns in the current shape", () => {
    expect(ROW_SHAPES.columns).toEqual(REPORT_COLUMNS);
  });
});
