import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { clientReport, type EdgeFixture, startEdge } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";

// A 503 says why, in the log and in /metrics: here the backlog is over its bound (no worker
// drains the queue), which an operator must tell apart from Redis being down or full.

const lines: Record<string, unknown>[] = [];
let fx: EdgeFixture;

beforeAll(async () => {
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n")) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  fx = await startEdge({
    env: { BACKLOG_MAX_JOBS: "2", BACKLOG_CHECK_INTERVAL_MS: "20" },
    logger: pino({ level: "info" }, sink),
  });
});

afterAll(async () => {
  await fx?.close();
});

async function metrics(): Promise<string> {
  return (await fx.edge.app.inject({ method: "GET", url: "/metrics" })).body;
}

it("backlog over its bound: 503s counted by reason and logged with it", async () => {
  const k = await fx.createKey();
  const res = await eventually(
    async () => {
      const r = await fx.post(clientReport(), { key: k.key });
      expect(r.statusCode).toBe(503);
      return r;
    },
    { timeoutMs: 10_000, intervalMs: 25 },
  );
  expect(res.json()).toMatchObject({ error: "unavailable" });

  const text = await metrics();
  const refused = Number(/^headroom_unavailable_total\{reason="backlog"\} (\S+)$/m.exec(text)?.[1]);
  expect(refused).toBeGreaterThanOrEqual(1);
  expect(text).toMatch(/^headroom_backlog_max_jobs 2$/m);
  expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
  expect(text).toMatch(/^process_resident_memory_bytes /m);
  expect(lines.some((l) => l.code === "unavailable" && l.reason === "backlog")).toBe(true);
});
