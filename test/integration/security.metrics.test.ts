import { Redis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { type Proc, startProcess } from "../../fixtures/processes.js";
import { createKeyStore } from "../../src/keys/key-store.js";
import { clientReport, type EdgeFixture, startEdge, uniqueId } from "../helpers/edge-fixture.js";
import { freePorts } from "../helpers/free-ports.js";
import { post } from "../helpers/load.js";

// /metrics, the edge's one admin surface: on the public listener, optionally behind
// METRICS_TOKEN; or, with METRICS_PORT, on a listener of its own and not on the public one.

const fixtures: EdgeFixture[] = [];
const procs: Proc[] = [];

afterAll(async () => {
  for (const p of procs) p.signal("SIGKILL");
  await Promise.all(procs.map((p) => p.exited));
  await Promise.all(fixtures.map((f) => f.close()));
});

const TOKEN = `metrics-${uniqueId()}${uniqueId()}`;

describe("on the public listener", () => {
  it("open without METRICS_TOKEN", async () => {
    const fx = await startEdge();
    fixtures.push(fx);
    expect(fx.edge.metricsApp).toBeNull();
    const res = await fx.edge.app.inject({ method: "GET", url: "/metrics" });
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(/^# HELP headroom_/m);
  });

  it("with METRICS_TOKEN, only for the exact token", async () => {
    const fx = await startEdge({ env: { METRICS_TOKEN: TOKEN } });
    fixtures.push(fx);
    const get = (authorization?: string) =>
      fx.edge.app.inject({
        method: "GET",
        url: "/metrics",
        headers: authorization === undefined ? {} : { authorization },
      });
    for (const wrong of [
      undefined,
      "",
      TOKEN,
      `Bearer ${TOKEN.slice(0, -1)}`,
      `Bearer ${TOKEN}x`,
      `Basic ${TOKEN}`,
      `bearer ${TOKEN.toUpperCase()}`,
    ]) {
      const res = await get(wrong);
      expect(res.statusCode, String(wrong)).toBe(401);
      expect(res.headers["www-authenticate"]).toBe("Bearer");
      expect(res.json()).toMatchObject({ error: "missing_project_key" });
      expect(res.body).not.toContain(TOKEN);
    }
    const ok = await get(`Bearer ${TOKEN}`);
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toMatch(/headroom_http_requests_total/);
  });
});

describe("on METRICS_PORT", () => {
  it("a real edge serves /metrics on its own port, behind the token, and not publicly", async () => {
    const redisUrl = inject("redisUrl");
    const tag = uniqueId();
    const redis = new Redis(redisUrl);
    const { key } = await createKeyStore(redis).create(`t-${tag}-metrics`, {
      defaultPlan: "unlimited",
    });
    await redis.quit();
    const [port, metricsPort] = await freePorts(2);
    const edge = startProcess("src/main/edge.ts", {
      REDIS_URL: redisUrl,
      QUEUE_PREFIX: `{t-${tag}}`,
      QUEUE_NAME: `reports-${tag}`,
      HOST: "127.0.0.1",
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      METRICS_TOKEN: TOKEN,
      LOG_LEVEL: "info",
    });
    procs.push(edge);
    await edge.waitFor(/edge ready/);
    expect(edge.output()).toContain(`"metricsPort":${metricsPort}`);
    const publicUrl = `http://127.0.0.1:${port}`;
    const metricsUrl = `http://127.0.0.1:${metricsPort}`;

    // The public listener: reports yes, metrics no.
    expect((await post(publicUrl, { key, body: JSON.stringify(clientReport()) })).status).toBe(200);
    for (const authorization of [undefined, `Bearer ${TOKEN}`]) {
      const res = await fetch(`${publicUrl}/metrics`, {
        headers: authorization ? { authorization } : {},
      });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ error: "not_found" });
    }

    // The metrics listener: metrics and readiness's figures behind the token, and nothing else.
    expect((await fetch(`${metricsUrl}/metrics`)).status).toBe(401);
    const metrics = await fetch(`${metricsUrl}/metrics`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    // It counts the public listener's traffic.
    expect(text).toMatch(/headroom_http_requests_total\{route="\/api\/report",status="200"\} 1/);
    // Readiness with its figures, behind the same token.
    expect(await (await fetch(`${metricsUrl}/readyz`)).json()).toStrictEqual({ status: "ok" });
    const ready = await fetch(`${metricsUrl}/readyz`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(await ready.json()).toMatchObject({
      status: "ok",
      checks: { backlog: { jobs: expect.any(Number) } },
    });
    for (const path of ["/api/report", "/openapi.json"]) {
      const res = await fetch(`${metricsUrl}${path}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(res.status, path).toBe(404);
    }

    edge.signal("SIGTERM");
    expect(await edge.exited).toStrictEqual({ code: 0, signal: null });
  });
});
