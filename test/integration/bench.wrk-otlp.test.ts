import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCleanup } from "../../bench/cleanup.js";
import { writeOtlpFiles } from "../../bench/otlp-bodies.js";
import { runWrk } from "../../bench/wrk.js";
import { decodeTraces } from "../../src/otlp/decode-traces.js";
import { spanReports } from "../../src/otlp/span-reports.js";

// Phase 2c's load (issue 47): wrk with bench/wrk-report.lua in its OTLP mode sends protobuf
// exports of 100 spans, 50 of them OpenAI calls, to /v1/traces, with span ids new in every
// request, so that the edge takes the normal path and not the exporter-retry one (duplicates).

const dir = mkdtempSync(join(tmpdir(), "headroom-bench-wrk-otlp-"));
const received: { url: string; type: string; body: Buffer }[] = [];
let server: Server;
let url = "";

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({
        url: req.url ?? "",
        type: req.headers["content-type"] ?? "",
        body: Buffer.concat(chunks),
      });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

it("wrk's OTLP mode sends decodable exports of 50 OpenAI calls among 100 spans, no span id twice", async () => {
  const files = writeOtlpFiles(dir, "otlp", ["hr_key_a"], { templates: 3, spans: 100 });
  const cleanup = createCleanup();
  try {
    await runWrk(
      { urls: [url], ...files, connections: 2, durationS: 1, mode: "saturate", path: "/v1/traces" },
      cleanup,
    );
  } finally {
    await cleanup.run();
  }
  // More requests than templates: ids would repeat if the bodies were only rotated.
  expect(received.length).toBeGreaterThan(3);
  const ids = new Set<string>();
  for (const req of received) {
    expect(req.url).toBe("/v1/traces");
    expect(req.type).toBe("application/x-protobuf");
    expect(req.body.length).toBe(files.bodyBytes);
    const mapped = spanReports(decodeTraces(req.body, "protobuf"));
    expect(mapped.reports).toHaveLength(50);
    expect(mapped.ignored).toBe(50);
    for (const r of mapped.reports) {
      expect(r.body.provider).toBe("openai");
      ids.add(String(r.body.id));
    }
  }
  expect(ids.size).toBe(received.length * 50);
});
