import { afterAll, beforeAll, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { jobRows } from "../../src/queue/job-rows.js";
import { REPORT_JOB, type ReportJobData } from "../../src/queue/reports-queue.js";
import { REPORT_COLUMNS, type ReportRow } from "../../src/report/report-schema.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// Jobs in both forms on one queue, as an upgrade finds them: flat jobs that an older edge queued
// (written here as it wrote them) beside the grouped jobs this edge writes for a batch. The worker
// stores every report of both once, field-exact, in the table and in the rollups.

const PROJECT = `p-forms-${uniqueId()}`;
const logger = createLogger("silent", "test");
let p: Pipeline;
let edge: Edge;
let worker: IngestWorker | undefined;

beforeAll(async () => {
  p = await startPipeline({ ALERTS_ENABLED: "false" });
  edge = await createEdge(p.config, logger);
});

afterAll(async () => {
  await worker?.close();
  await edge?.close();
  await p?.close();
});

const NUMERIC = new Set(REPORT_COLUMNS.slice(REPORT_COLUMNS.indexOf("requests_limit")));

/** Every column of the stored report equals the row's (model null is stored as ''). */
function expectStored(stored: (string | null)[], row: ReportRow) {
  REPORT_COLUMNS.forEach((column, i) => {
    const want = row[i] ?? null;
    const got = stored[i] ?? null;
    if (want === null) expect(got, column).toBe(column === "model" ? "" : null);
    else if (NUMERIC.has(column)) expect(Number(got), column).toBe(Number(want));
    else expect(got, column).toBe(String(want));
  });
}

it("a worker stores the reports of flat and grouped jobs once, field-exact", {
  timeout: 60_000,
}, async () => {
  const { key, keyId } = await edge.keyStore.create(PROJECT, { defaultPlan: "unlimited" });
  // The previous release's jobs: flat rows of shape 1, and from before shapes, no `v` at all.
  const old = Array.from({ length: 20 }, (_, i) => sampleRow(i, PROJECT, keyId));
  await p.queue.add(REPORT_JOB, { v: 1, rows: old.slice(0, 10) });
  await p.queue.add(REPORT_JOB, { rows: old.slice(10) } as unknown as ReportJobData);

  // This edge's batch: one grouped job.
  const res = await edge.app.inject({
    method: "POST",
    url: "/api/reports",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(Array.from({ length: 50 }, (_, i) => clientReport({ app: `a${i}` }))),
  });
  expect(res.statusCode, res.body).toBe(200);
  const ids = (res.json() as { results: { id: string }[] }).results.map((r) => r.id);
  const jobs = await p.queue.getJobs(["wait"]);
  const grouped = jobs.filter((j) => j.data.groups !== undefined);
  expect(grouped).toHaveLength(1);
  const data = grouped[0]?.data as ReportJobData;
  expect(data.groups?.map((g) => g.rows.length)).toEqual([50]);
  const batch = jobRows(data);
  expect(batch.map((r) => r[0])).toEqual(ids);
  expect(batch.map((r) => r[REPORT_COLUMNS.indexOf("app")])).toEqual(ids.map((_, i) => `a${i}`));
  const received = REPORT_COLUMNS.indexOf("received_at");
  for (const r of batch) {
    expect([r[1], r[2]]).toEqual([PROJECT, keyId]);
    expect(r[received]).toBe(batch[0]?.[received]);
  }

  worker = startIngestWorker(p, logger);
  await eventually(async () => expect(await p.jobCounts()).toEqual(DRAINED), {
    timeoutMs: 30_000,
  });
  const rs = await p.client.query({
    query: `SELECT ${REPORT_COLUMNS.map((c) => `toString(${c})`).join(", ")}
      FROM ${p.db}.reports_v WHERE project_id = {project:String}`,
    query_params: { project: PROJECT },
    format: "JSONCompactEachRow",
  });
  const stored = new Map((await rs.json<(string | null)[]>()).map((r) => [r[0], r]));
  const expected = [...old, ...batch];
  expect(stored.size).toBe(expected.length);
  for (const row of expected) expectStored(stored.get(String(row[0])) ?? [], row);
  expect(await p.rawCount(PROJECT)).toBe(expected.length);
  expect(await p.rollupCount(PROJECT)).toBe(expected.length);
});
