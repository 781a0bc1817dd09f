import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { MIGRATIONS, type Migration, migrate } from "../../src/clickhouse/migrations.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import { createLogger } from "../../src/lib/logger.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import type { ReportRow } from "../../src/report/report-schema.js";
import { ROW_SHAPE_HISTORY, ROW_SHAPES, rowShapes } from "../../src/report/row-shapes.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// A rolling upgrade to a release that adds a report field (`region`) and a rollup of it. The
// previous release's edges queued jobs in row shape 1, and one of its workers recorded a manifest
// and inserted it before it died. After `headroom migrate` (a new column, a new rollup filled from
// what is stored), the new release's workers store every report exactly once, in the table and in
// the new rollup, old shapes and new alike.

/** The next release's shape: this release's, and `region`. */
const NEXT = ROW_SHAPES.current + 1;
const NEXT_SHAPES = rowShapes({
  ...ROW_SHAPE_HISTORY,
  [NEXT]: [...ROW_SHAPES.columns, "region"],
});
const NEXT_MIGRATIONS: Migration[] = [
  ...MIGRATIONS,
  {
    version: MIGRATIONS.length + 1,
    name: "region",
    statements: (ctx) => [
      `ALTER TABLE ${ctx.db}.reports ADD COLUMN IF NOT EXISTS region LowCardinality(String) DEFAULT ''`,
      // A view's `SELECT *` is expanded when it is created: analysts see the column once it is
      // created again.
      `CREATE OR REPLACE VIEW ${ctx.db}.reports_v AS SELECT * FROM ${ctx.db}.reports FINAL`,
    ],
  },
  {
    version: MIGRATIONS.length + 2,
    name: "reports_by_region",
    statements: (ctx) => [
      `CREATE TABLE IF NOT EXISTS ${ctx.db}.reports_by_region (
        project_id LowCardinality(String), region LowCardinality(String),
        reports SimpleAggregateFunction(sum, UInt64)
      ) ENGINE = AggregatingMergeTree ORDER BY (project_id, region)
      SETTINGS non_replicated_deduplication_window = 100000`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${ctx.db}.reports_by_region_mv
      TO ${ctx.db}.reports_by_region AS
      SELECT project_id, region, count() AS reports FROM ${ctx.db}.reports
      GROUP BY project_id, region`,
    ],
    backfill: (ctx) => [
      `INSERT INTO ${ctx.db}.reports_by_region
      SELECT project_id, region, count() AS reports FROM ${ctx.db}.reports_v
      GROUP BY project_id, region`,
    ],
  },
];

const logger = createLogger("silent", "test");
let p: Pipeline;
const workers: IngestWorker[] = [];

function startWorker(next: boolean): IngestWorker {
  const worker = startIngestWorker(p, logger, next ? { rowShapes: NEXT_SHAPES } : {});
  workers.push(worker);
  return worker;
}

const drained = () =>
  eventually(async () => expect(await p.jobCounts()).toEqual(DRAINED), { timeoutMs: 30_000 });

beforeAll(async () => {
  p = await startPipeline({ ALERTS_ENABLED: "false" });
});

afterAll(async () => {
  for (const w of workers) await w.close();
  await p?.close();
});

describe("a rolling upgrade that adds a report field", () => {
  it("stores jobs and manifests of the previous release exactly once after migrate", async () => {
    // The previous release at work: its workers store 40 reports.
    const before = await p.fill(4, 10);
    const previous = startWorker(false);
    await drained();
    await previous.close();

    // Its edges queue 60 more (shape 1) while the workers are replaced.
    const queued = await p.fill(6, 10);

    // One of its workers had recorded a manifest for a job, inserted it, and died before
    // completing the job: the job is back in the queue, still owned by that manifest.
    const keyPrefix = `${p.config.QUEUE_PREFIX}:${p.config.QUEUE_NAME}`;
    const manifestRows: ReportRow[] = Array.from({ length: 5 }, (_, i) =>
      sampleRow(1000 + i, "p-test"),
    );
    const token = "previous-release-manifest";
    await createReportSink(p.client, p.db).insert(manifestRows, token);
    await p.redis.hset(`${keyPrefix}:manifest:${token}`, {
      rows: JSON.stringify(manifestRows),
      jobs: JSON.stringify([["orphan", 5]]),
      left: 1,
    });
    await p.redis.hset(`${keyPrefix}:manifest-owners`, "orphan", token);
    await p.queue.add(REPORT_JOB, { v: 1, rows: manifestRows }, { jobId: "orphan" });

    // The new release: migrate (the new column), then its workers; its edges queue the next shape.
    const withColumn = NEXT_MIGRATIONS.slice(0, MIGRATIONS.length + 1);
    expect(await migrate(p.client, { db: p.db, retentionDays: 30 }, () => {}, withColumn)).toEqual([
      MIGRATIONS.length + 1,
    ]);
    const fresh = Array.from({ length: 20 }, (_, i) => [...sampleRow(2000 + i, "p-test"), "eu"]);
    await p.queue.add(REPORT_JOB, { v: NEXT, rows: fresh });
    const next = [startWorker(true), startWorker(true)];
    await drained();

    let total = before.length + queued.length + manifestRows.length + fresh.length;
    expect(await p.rawCount()).toBe(total);
    expect(await p.distinctCount()).toBe(total);
    expect(await p.rollupCount()).toBe(total);
    const regions = `SELECT region, count() AS n FROM ${p.db}.reports_v
      WHERE project_id = 'p-test' GROUP BY region ORDER BY region`;
    expect(
      await p.client.query({ query: regions, format: "JSONCompactEachRow" }).then((r) => r.json()),
    ).toEqual([
      ["", total - fresh.length],
      ["eu", fresh.length],
    ]);

    // A later release adds a rollup by region, filled from what is stored. Its migration runs
    // with the workers stopped (SIGTERM: they complete what they inserted), so no batch is in
    // flight while the view starts and the backfill reads.
    for (const w of next) await w.close();
    const said: string[] = [];
    expect(
      await migrate(
        p.client,
        { db: p.db, retentionDays: 30 },
        (m) => said.push(m),
        NEXT_MIGRATIONS,
      ),
    ).toEqual([MIGRATIONS.length + 2]);
    expect(said).toContain(`applied migration ${MIGRATIONS.length + 2} reports_by_region`);
    const later = Array.from({ length: 10 }, (_, i) => [...sampleRow(3000 + i, "p-test"), "us"]);
    await p.queue.add(REPORT_JOB, { v: NEXT, rows: later });
    startWorker(true);
    await drained();

    total += later.length;
    expect(await p.distinctCount()).toBe(total);
    expect(await p.rawCount()).toBe(total);
    const byRegion = `SELECT region, sum(reports) AS n FROM ${p.db}.reports_by_region
      WHERE project_id = 'p-test' GROUP BY region ORDER BY region`;
    expect(
      await p.client.query({ query: byRegion, format: "JSONCompactEachRow" }).then((r) => r.json()),
    ).toEqual([
      ["", total - fresh.length - later.length],
      ["eu", fresh.length],
      ["us", later.length],
    ]);
  });
});
