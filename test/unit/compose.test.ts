import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CONFIG_KEYS } from "../../src/config.js";

// The compose file checked as data, with its variables at their defaults as compose reads it:
// every variable it gives Headroom is one the config schema knows, and services, healthchecks and
// dependencies are wired. (test/docker/compose.test.ts runs it on a Docker engine.)

interface Service {
  image?: string;
  mem_limit?: string;
  logging?: { driver: string; options: Record<string, string> };
  volumes?: string[];
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
}

/**
 * Compose's interpolation, with every variable unset: `${X:-d}` and `${X-d}` give d; a required
 * `${X:?message}` gives `<X>`, standing for the value compose refuses to start without.
 */
function withDefaults(text: string): string {
  return text
    .replace(/\$\{([A-Z_]+):\?[^}]*\}/g, (_, name: string) => `<${name}>`)
    .replace(/\$\{[A-Z_]+(?::?-([^}]*))?\}/g, (_, fallback: string | undefined) => fallback ?? "");
}

function load(file: string) {
  return parse(withDefaults(readFileSync(file, "utf8")), { merge: true }) as {
    services: Record<string, Service>;
  };
}

const compose = load("docker-compose.yml");
const services = compose.services;
const headroomServices = ["migrate", "edge", "worker", "alerts"];

describe("docker-compose.yml", () => {
  it("has the services of the deployment", () => {
    expect(Object.keys(services).sort()).toEqual([
      "alerts",
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

describe("docker-compose.yml: credentials and limits", () => {
  const text = readFileSync("docker-compose.yml", "utf8");
  const env = (name: string) => services[name]?.environment ?? {};

  it("refuses to start without a password for Redis and each ClickHouse user", () => {
    expect(text).not.toContain("change-me");
    for (const secret of [
      "REDIS_PASSWORD",
      "CLICKHOUSE_PASSWORD",
      "CLICKHOUSE_MIGRATE_PASSWORD",
      "CLICKHOUSE_WRITER_PASSWORD",
      "CLICKHOUSE_READER_PASSWORD",
    ]) {
      expect(text, secret).toContain(`\${${secret}:?`);
      expect(text, secret).not.toMatch(new RegExp(`\\$\\{${secret}:?-`));
    }
  });

  it("gives the internet-facing edge Redis only, no ClickHouse credentials", () => {
    expect(Object.keys(env("edge")).filter((k) => k.startsWith("CLICKHOUSE_"))).toEqual([]);
    expect(env("edge").REDIS_URL).toBeDefined();
  });

  it("runs migrations, inserts and reads as separate ClickHouse users", () => {
    expect(env("migrate").CLICKHOUSE_USER).toBe("headroom_migrate");
    expect(env("migrate").CLICKHOUSE_PASSWORD).toBe("<CLICKHOUSE_MIGRATE_PASSWORD>");
    expect(env("migrate").REDIS_URL).toBeUndefined();
    for (const name of ["worker", "alerts"]) {
      expect(env(name).CLICKHOUSE_USER, name).toBe("headroom_writer");
      expect(env(name).CLICKHOUSE_PASSWORD, name).toBe("<CLICKHOUSE_WRITER_PASSWORD>");
    }
    // The server's admin is none of them; its users file takes each password from its env.
    const server = env("clickhouse");
    expect(server.CLICKHOUSE_USER).toBe("headroom_admin");
    expect(services.clickhouse?.volumes).toContain(
      "./deploy/clickhouse/users.d/headroom.xml:/etc/clickhouse-server/users.d/headroom.xml:ro",
    );
    const users = readFileSync("deploy/clickhouse/users.d/headroom.xml", "utf8");
    for (const [user, variable] of [
      ["headroom_migrate", "CLICKHOUSE_MIGRATE_PASSWORD"],
      ["headroom_writer", "CLICKHOUSE_WRITER_PASSWORD"],
      ["headroom_reader", "CLICKHOUSE_READER_PASSWORD"],
    ] as const) {
      expect(users).toMatch(new RegExp(`<${user}>\\s*<password from_env="${variable}" />`));
      expect(server[variable], variable).toBe(`<${variable}>`);
    }
  });

  it("turns Redis authentication on, and every Headroom process authenticates", () => {
    const command = services.redis?.command ?? [];
    expect(command[command.indexOf("--requirepass") + 1]).toBe("<REDIS_PASSWORD>");
    for (const name of ["edge", "worker", "alerts"]) {
      expect(env(name).REDIS_URL, name).toBe("redis://:<REDIS_PASSWORD>@redis:6379");
    }
    expect(services.redis?.healthcheck?.test.join(" ")).toContain("redis-cli ping");
    expect(env("redis").REDISCLI_AUTH).toBe("<REDIS_PASSWORD>");
  });

  it("limits every service's memory and log size", () => {
    for (const [name, s] of Object.entries(services)) {
      expect(s.mem_limit, name).toMatch(/^\d+[mg]$/);
      expect(s.logging?.driver, name).toBe("json-file");
      expect(s.logging?.options["max-size"], name).toMatch(/^\d+m$/);
      expect(s.logging?.options["max-file"], name).toMatch(/^\d+$/);
    }
    // Redis's container allows more than its maxmemory: an AOF rewrite forks.
    const gb = (v: string) => Number.parseFloat(v) * (/m/i.test(v) ? 1 / 1024 : 1);
    const command = services.redis?.command ?? [];
    const maxmemory = command[command.indexOf("--maxmemory") + 1] ?? "";
    expect(gb(services.redis?.mem_limit ?? "0")).toBeGreaterThan(gb(maxmemory));
  });

  it("says, where an operator reads it, that the Redis volume is the only copy of the keys", () => {
    expect(text).toMatch(/only copy of every project's\s+#?\s*keys/);
    expect(text).toContain("docker compose down -v");
    expect(text).toContain("cli.js backup -");
  });
});

describe("docker-compose.test.yml", () => {
  const override = load("docker-compose.test.yml").services;

  it("replaces the stores with images that can be built or had locally", () => {
    expect(Object.keys(override).sort()).toEqual([
      "alerts",
      "clickhouse",
      "migrate",
      "redis",
      "worker",
    ]);
    expect(override.redis?.image).toBe("redis:7");
    expect(override.clickhouse?.build).toMatchObject({ target: "clickhouse-embedded" });
    expect(override.clickhouse?.command?.slice(0, 3)).toEqual(["headroom", "clickhouse", "serve"]);
    expect(override.clickhouse?.healthcheck?.test.join(" ")).toContain("/ping");
  });

  it("points every role that uses ClickHouse at the embedded server's one user", () => {
    for (const name of ["migrate", "worker", "alerts"]) {
      expect(override[name]?.environment, name).toEqual({
        CLICKHOUSE_USER: "headroom_admin",
        CLICKHOUSE_PASSWORD: "<CLICKHOUSE_PASSWORD>",
      });
      expect(override[name]?.image, name).toBeUndefined();
    }
  });

  it("leaves Headroom's images to the base file, which publishes no fixed port in tests", () => {
    const text = readFileSync("docker-compose.yml", "utf8");
    expect(text.match(/image: \$\{HEADROOM_IMAGE:-headroom:local\}/g)).toHaveLength(4);
    for (const v of ["REDIS_HOST_PORT", "CLICKHOUSE_HOST_PORT", "EDGE_HOST_PORTS"]) {
      expect(text).toContain(`\${${v}-`);
    }
  });
});
