import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CONFIG_KEYS } from "../../src/config.js";

// No Docker engine runs here, so the compose file is checked as data: every variable it gives
// Headroom is one the config schema knows, and services, healthchecks and dependencies are wired.

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
}

const compose = parse(readFileSync("docker-compose.yml", "utf8"), { merge: true }) as {
  services: Record<string, Service>;
};
const services = compose.services;
const headroomServices = ["migrate", "edge", "worker"];

describe("docker-compose.yml", () => {
  it("has the services of the deployment", () => {
    expect(Object.keys(services).sort()).toEqual([
      "clickhouse",
      "edge",
      "migrate",
      "redis",
      "worker",
    ]);
  });

  it("sets only variables the config schema knows", () => {
    for (const name of headroomServices) {
      const env = Object.keys(services[name]?.environment ?? {});
      expect(env.length, name).toBeGreaterThan(0);
      for (const key of env) expect(CONFIG_KEYS, `${name}: ${key}`).toContain(key);
    }
  });

  it("runs Headroom's entry points from the built image", () => {
    expect(services.migrate?.build).toBeDefined();
    expect(services.edge?.command).toEqual(["node", "dist/src/main/edge.js"]);
    expect(services.worker?.command).toEqual(["node", "dist/workers/ingest.js"]);
    expect(services.migrate?.command).toEqual(["node", "dist/src/main/cli.js", "migrate"]);
  });

  it("pins images, gives the stores healthchecks and durable settings", () => {
    for (const name of ["redis", "clickhouse"]) {
      const s = services[name] as Service;
      expect(s.image).toMatch(/:\d/);
      expect(s.healthcheck?.test.length).toBeGreaterThan(0);
    }
    const redisCommand = services.redis?.command?.join(" ") ?? "";
    expect(redisCommand).toContain("--appendonly yes");
    expect(redisCommand).toContain("--maxmemory-policy noeviction");
  });

  it("starts Headroom only after its stores are healthy and the schema migrated", () => {
    expect(services.migrate?.depends_on?.clickhouse?.condition).toBe("service_healthy");
    for (const name of ["edge", "worker"]) {
      const deps = services[name]?.depends_on ?? {};
      expect(deps.redis?.condition, name).toBe("service_healthy");
      expect(deps.migrate?.condition, name).toBe("service_completed_successfully");
      expect(services[name]?.healthcheck, name).toBeDefined();
    }
    expect(services.worker?.depends_on?.clickhouse?.condition).toBe("service_healthy");
  });

  it("binds published ports to 127.0.0.1 and lets edge and worker scale", () => {
    for (const [name, s] of Object.entries(services)) {
      for (const port of s.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:/);
    }
    // A fixed host port would stop `--scale`; the edge publishes a range, the worker nothing.
    expect(services.edge?.ports?.[0]).toMatch(/-\d+:3000$/);
    expect(services.worker?.ports).toBeUndefined();
  });
});
