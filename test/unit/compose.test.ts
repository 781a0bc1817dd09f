import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CONFIG_KEYS } from "../../src/config.js";

// The compose file checked as data, with its variables at their defaults as compose reads it:
// every variable it gives Headroom is one the config schema knows, and services, healthchecks and
// dependencies are wired. (test/docker/compose.test.ts runs it on a Docker engine.)

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
}

/** Compose's interpolation, with every variable unset: `${X:-d}` and `${X-d}` give d. */
function withDefaults(text: string): string {
  return text.replace(
    /\$\{[A-Z_]+(?::?-([^}]*))?\}/g,
    (_, fallback: string | undefined) => fallback ?? "",
  );
}

function load(file: string) {
  return parse(withDefaults(readFileSync(file, "utf8")), { merge: true }) as {
    services: Record<string, Service>;
  };
}

const compose = load("docker-compose.yml");
const services = compose.services;
const headroomServices = ["migrate", "edge", "api", "worker", "alerts"];

describe("docker-compose.yml", () => {
  it("has the services of the deployment", () => {
    expect(Object.keys(services).sort()).toEqual([
      "alerts",
      "api",
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
    expect(services.api?.command).toEqual(["node", "dist/src/main/api.js"]);
    expect(services.worker?.command).toEqual(["node", "dist/workers/ingest.js"]);
    expect(services.alerts?.command).toEqual(["node", "dist/workers/alerts.js"]);
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
    for (const name of ["edge", "api", "worker"]) {
      const deps = services[name]?.depends_on ?? {};
      expect(deps.redis?.condition, name).toBe("service_healthy");
      expect(deps.migrate?.condition, name).toBe("service_completed_successfully");
      expect(services[name]?.healthcheck, name).toBeDefined();
    }
    expect(services.worker?.depends_on?.clickhouse?.condition).toBe("service_healthy");
    expect(services.api?.depends_on?.clickhouse?.condition).toBe("service_healthy");
  });

  it("binds published ports to 127.0.0.1 and lets edge and worker scale", () => {
    for (const [name, s] of Object.entries(services)) {
      for (const port of s.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:/);
    }
    // A fixed host port would stop `--scale`; the edge publishes a range, the worker nothing.
    expect(services.edge?.ports?.[0]).toMatch(/-\d+:3000$/);
    expect(services.api?.ports?.[0]).toMatch(/-\d+:3001$/);
    expect(services.worker?.ports).toBeUndefined();
  });
});

describe("docker-compose.test.yml", () => {
  const override = load("docker-compose.test.yml").services;

  it("replaces only the stores, with images that can be built or had locally", () => {
    expect(Object.keys(override).sort()).toEqual(["clickhouse", "redis"]);
    expect(override.redis?.image).toBe("redis:7");
    expect(override.clickhouse?.build).toMatchObject({ target: "clickhouse-embedded" });
    expect(override.clickhouse?.command?.slice(0, 3)).toEqual(["headroom", "clickhouse", "serve"]);
    expect(override.clickhouse?.healthcheck?.test.join(" ")).toContain("/ping");
  });

  it("leaves Headroom's images to the base file, which publishes no fixed port in tests", () => {
    const text = readFileSync("docker-compose.yml", "utf8");
    expect(text.match(/image: \$\{HEADROOM_IMAGE:-headroom:local\}/g)).toHaveLength(5);
    for (const v of [
      "REDIS_HOST_PORT",
      "CLICKHOUSE_HOST_PORT",
      "EDGE_HOST_PORTS",
      "API_HOST_PORTS",
    ]) {
      expect(text).toContain(`\${${v}-`);
    }
  });
});
