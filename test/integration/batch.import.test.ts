import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { uuidFromForeignId } from "../../src/cli/import-source.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// `headroom import` as a user runs it (bin/headroom.mjs, a child process) against an edge
// listening on a port, a worker and ClickHouse: every report of the file stored once; a bar on
// a terminal (a pty from script(1)), plain lines otherwise.

const PROJECT = `p-import-${uniqueId()}`;
const dir = mkdtempSync(join(tmpdir(), "headroom-import-"));
let p: Pipeline;
let edge: Edge;
let worker: IngestWorker;
let key: string;
let url: string;
const logger = createLogger("silent", "test");

beforeAll(async () => {
  p = await startPipeline();
  edge = await createEdge(p.config, logger);
  url = await edge.app.listen({ host: "127.0.0.1", port: 0 });
  worker = startIngestWorker(p, logger);
  ({ key } = await edge.keyStore.create(PROJECT, { defaultPlan: "unlimited" }));
  // The burst limit would only pace the import; it is not what this file is about.
  await edge.keyStore.setPlan(PROJECT, "unlimited", { burst: 1_000_000, capacity: 1_000_000 });
});

afterAll(async () => {
  await worker?.close();
  await edge?.close();
  await p?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { timeout: 240_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const headroom = (args: string[]) => run(process.execPath, ["bin/headroom.mjs", ...args]);

const count = (project: string) =>
  p.scalar(`SELECT count() FROM ${p.db}.reports WHERE project_id = '${project}'`);

it("imports a 100,000-report NDJSON file: each stored once, plain progress lines off a terminal", {
  timeout: 300_000,
}, async () => {
  const N = 100_000;
  const file = join(dir, "reports.ndjson");
  const lines = Array.from({ length: N }, (_, i) =>
    JSON.stringify(clientReport({ app: `app-${i % 7}` })),
  );
  writeFileSync(file, `${lines.join("\n")}\n`);
  const res = await headroom(["import", file, "--key", key, "--url", url]);
  expect(res.stderr).not.toContain("\r");
  expect(res.stderr).toMatch(
    /^import: \d+\/100000 reports, accepted \d+, refused 0, \d+ reports\/s, ETA/m,
  );
  expect(res.stdout).toContain(
    "imported 100000 reports: accepted 100000 (0 already stored), refused 0",
  );
  expect(res.code).toBe(0);
  await eventually(
    async () => {
      expect(await count(PROJECT)).toBe(N);
      expect(await p.jobCounts()).toStrictEqual(DRAINED);
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  expect(
    await p.scalar(
      `SELECT uniqExact(report_id) FROM ${p.db}.reports WHERE project_id = '${PROJECT}'`,
    ),
  ).toBe(N);
  expect(await p.rollupCount(PROJECT)).toBe(N);
});

it("reports without ids, from a file then from stdin: each stored once, identical lines kept apart", {
  timeout: 120_000,
}, async () => {
  const project = `p-import-again-${uniqueId()}`;
  const created = await edge.keyStore.create(project, { defaultPlan: "unlimited" });
  const distinct = Array.from({ length: 1_500 }, (_, i) =>
    JSON.stringify(clientReport({ app: `app-${i}` })),
  );
  // 500 lines twice: the same report sent twice by its client is two reports. A line that is
  // not JSON is refused as it is read; the others are sent.
  const lines = [...distinct, "{broken", ...distinct.slice(0, 500)];
  const file = join(dir, "again.ndjson");
  writeFileSync(file, `${lines.join("\n")}\n`);
  const first = await headroom(["import", file, "--key", created.key, "--url", url]);
  expect(first.stdout).toContain(
    "imported 2001 reports: accepted 2000 (0 already stored), refused 1",
  );
  expect(first.stdout).toMatch(/invalid_json: 1 \(first: report 1501: not JSON \(.*\): \{broken/);
  expect(first.code).toBe(1);
  const cmd = `${process.execPath} bin/headroom.mjs import - --key '${created.key}' --url '${url}'`;
  const second = await run("bash", ["-c", `${cmd} < '${file}'`]);
  expect(second.stdout).toContain("accepted 2000 (2000 already stored), refused 1");
  await eventually(
    async () => {
      expect(await count(project)).toBe(2_000);
      expect(await p.jobCounts()).toStrictEqual(DRAINED);
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  expect(await p.rollupCount(project)).toBe(2_000);
});

it("a JSON array that ends too soon: nothing is sent, one line says why, exit 1", async () => {
  const project = `p-import-cut-${uniqueId()}`;
  const created = await edge.keyStore.create(project, { defaultPlan: "unlimited" });
  const file = join(dir, "cut.json");
  writeFileSync(file, `[${JSON.stringify(clientReport())},${JSON.stringify(clientReport())}`);
  const res = await headroom(["import", file, "--key", created.key, "--url", url]);
  expect([res.code, res.stdout, res.stderr]).toEqual([
    1,
    "",
    `headroom: ${file}: the file ends inside its JSON array\n`,
  ]);
  // Anything the edge had taken would be queued or stored by now.
  await eventually(async () => expect(await p.jobCounts()).toStrictEqual(DRAINED));
  expect(await count(project)).toBe(0);
});

it("the original service's export, imported twice on a terminal: a bar, and each row stored once", {
  timeout: 120_000,
}, async () => {
  const project = `p-import-dl-${uniqueId()}`;
  const created = await edge.keyStore.create(project, { defaultPlan: "unlimited" });
  const at = new Date(Date.now() - 3_600_000).toISOString();
  const rows = Array.from({ length: 3_000 }, (_, i) => ({
    id: `clx${i.toString(36).padStart(22, "0")}`,
    projectId: "cl_original_project",
    app: "default",
    provider: "openai",
    model: i % 2 ? "gpt-4o" : null,
    timestamp: at,
    limits: { requests_limit: 500, requests_remaining: 500 - (i % 500) },
    createdAt: at,
  }));
  rows.push({ ...(rows[0] as (typeof rows)[number]), id: "not-json-safe", provider: "" });
  const file = join(dir, "export.json");
  writeFileSync(file, JSON.stringify(rows));
  const args = ["import", file, "--key", created.key, "--url", url, "--batch", "100"];
  const cmd = [process.execPath, "bin/headroom.mjs", ...args].map((a) => `'${a}'`).join(" ");
  // script(1) gives the command a pty: stderr is a terminal.
  const first = await run("script", ["-q", "-e", "-c", cmd, "/dev/null"]);
  expect(first.stdout).toMatch(
    /\r\[[#-]{24}\] \d+% \d+\/3001 {2}\d+ reports\/s {2}accepted \d+ {2}refused \d+ {2}ETA/,
  );
  expect(first.stdout).toContain(
    "imported 3001 reports: accepted 3000 (0 already stored), refused 1",
  );
  expect(first.stdout).toMatch(/invalid_report: 1 \(first: report 3001: provider/);
  // A refusal fails the command: a script sees the import was not whole.
  expect([first.code, first.stderr]).toEqual([1, ""]);
  const second = await headroom(args);
  expect(second.stdout).toContain("accepted 3000 (3000 already stored), refused 1");
  await eventually(async () => expect(await count(project)).toBe(3_000), {
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  const stored = await p.client.query({
    query: `SELECT toString(report_id) AS id, model FROM ${p.db}.reports WHERE project_id = '${project}' AND report_id = '${uuidFromForeignId("delimiter", rows[1]?.id as string)}'`,
    format: "JSONEachRow",
  });
  expect(await stored.json()).toEqual([
    { id: uuidFromForeignId("delimiter", rows[1]?.id as string), model: "gpt-4o" },
  ]);
});
