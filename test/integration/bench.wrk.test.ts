import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCleanup } from "../../bench/cleanup.js";
import { fileLines } from "../../bench/load-spec.js";
import { writeLoadFiles } from "../../bench/report-bodies.js";
import { runWrk } from "../../bench/wrk.js";

// The benchmark's saturating load generator, Debian's wrk with bench/wrk-report.lua, against a
// server that records what it receives: every request is a POST /api/report of one of the
// phase's bodies with one of its keys, keys and bodies go round-robin, and what wrk reports
// (requests, failed answers, its own CPU) agrees with what the server saw.

const dir = mkdtempSync(join(tmpdir(), "headroom-bench-wrk-"));
const received: { method: string; url: string; type: string; auth: string; body: string }[] = [];
let server: Server;
let url = "";

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => {
      body += c;
    });
    req.on("end", () => {
      received.push({
        method: req.method ?? "",
        url: req.url ?? "",
        type: req.headers["content-type"] ?? "",
        auth: req.headers.authorization ?? "",
        body,
      });
      // Every tenth request is refused, as an edge under pressure would.
      const refused = received.length % 10 === 0;
      res.writeHead(refused ? 503 : 200, { "content-type": "application/json" });
      res.end(refused ? '{"error":"unavailable"}' : '{"id":"x"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe("wrk with bench/wrk-report.lua", () => {
  it("sends the phase's bodies and keys round-robin and reports what it did", async () => {
    const keys = ["hr_key_a", "hr_key_b", "hr_key_c"];
    const files = writeLoadFiles(dir, "wrk", keys, { bodies: 50 });
    const bodies = new Set(fileLines(readFileSync(files.bodiesFile, "utf8")));
    const cleanup = createCleanup();
    try {
      const r = await runWrk(
        { urls: [url], ...files, connections: 4, durationS: 1, mode: "saturate" },
        cleanup,
      );
      expect(received.length).toBeGreaterThan(50);
      for (const req of received) {
        expect(req.method).toBe("POST");
        expect(req.url).toBe("/api/report");
        expect(req.type).toBe("application/json");
        expect(bodies.has(req.body)).toBe(true);
      }
      // Round-robin: every key and every body used, each key about a third of the time (50 bodies:
      // 17, 17 and 16 of them per key).
      const byKey = new Map<string, number>();
      for (const req of received) byKey.set(req.auth, (byKey.get(req.auth) ?? 0) + 1);
      expect([...byKey.keys()].sort()).toEqual(keys.map((k) => `Bearer ${k}`));
      for (const n of byKey.values()) expect(n).toBeGreaterThan(received.length / 4);
      expect(new Set(received.map((q) => q.body)).size).toBe(bodies.size);

      // wrk counts the answers it got; a few requests may still be in flight when it stops.
      expect(r.sent).toBeLessThanOrEqual(received.length);
      expect(r.sent).toBeGreaterThanOrEqual(received.length - 4);
      const refused = Math.floor(received.length / 10);
      expect(r.statuses["4xx/5xx"]).toBeGreaterThanOrEqual(refused - 4);
      expect(r.statuses["4xx/5xx"]).toBeLessThanOrEqual(refused);
      expect(r.errors).toBe(0);
      expect(r.durationS).toBeGreaterThan(0.9);
      expect(r.okPerSec).toBeGreaterThan(0);
      expect(r.latencyMs.p99).toBeGreaterThan(0);
      expect(r.latencyMs.max).toBeGreaterThanOrEqual(r.latencyMs.p99);
      // Its own CPU, read from /proc/self/stat in done(): some, and at most its one thread's.
      expect(r.generatorCpuS).toBeGreaterThan(0);
      expect(r.generatorCores).toBeLessThanOrEqual(1.2);
      expect(r).toMatchObject({ generator: "wrk", generators: 1, mode: "saturate" });
    } finally {
      await cleanup.run();
    }
  });
});
