import { describe, expect, it } from "vitest";
import {
  CONFIG_KEYS,
  ConfigError,
  DEFAULT_PLANS,
  isSet,
  loadConfig,
  migratesOnStart,
} from "../../src/config.js";

// The one config schema: coerced numbers, real booleans, empty means unset, and a bad value
// stops the process with a message that names the variable.

function configError(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`no ConfigError for ${JSON.stringify(env)}`);
}

describe("loadConfig", () => {
  it("has defaults for everything", () => {
    const c = loadConfig({});
    expect(c.PORT).toBe(3000);
    expect(c.LOG_LEVEL).toBe("info");
    expect(c.LOG_REQUESTS).toBe(false);
    expect(c.CLICKHOUSE_URL).toBeUndefined();
    expect(c.CLICKHOUSE_DATABASE).toBe("headroom");
    expect(c.PLANS).toEqual(DEFAULT_PLANS);
    expect(c.HEADROOM_DATA_DIR).toBe("./.data");
    expect(c.STACK_REDIS_PORT).toBeUndefined();
  });

  it("coerces numbers and reads booleans as booleans", () => {
    const c = loadConfig({
      PORT: "8080",
      REDIS_MEMORY_MAX_RATIO: "0.5",
      LOG_REQUESTS: "yes",
      TRUST_PROXY: "1",
      MIGRATE_ON_START: "off",
      STACK_CLICKHOUSE_PORT: "18123",
    });
    expect(c.PORT).toBe(8080);
    expect(c.REDIS_MEMORY_MAX_RATIO).toBe(0.5);
    expect(c.LOG_REQUESTS).toBe(true);
    expect(c.TRUST_PROXY).toBe(1);
    expect(c.MIGRATE_ON_START).toBe(false);
    expect(c.STACK_CLICKHOUSE_PORT).toBe(18123);
  });

  it("waits a quarter of BATCH_MAX_WAIT_MS before an early insert unless BATCH_MIN_WAIT_MS says", () => {
    expect(loadConfig({}).BATCH_MIN_WAIT_MS).toBe(250);
    expect(loadConfig({ BATCH_MAX_WAIT_MS: "60000" }).BATCH_MIN_WAIT_MS).toBe(15_000);
    expect(loadConfig({ BATCH_MAX_WAIT_MS: "3" }).BATCH_MIN_WAIT_MS).toBe(0);
    expect(loadConfig({ BATCH_MIN_WAIT_MS: "40" }).BATCH_MIN_WAIT_MS).toBe(40);
    expect(loadConfig({ BATCH_MIN_WAIT_MS: "0" }).BATCH_MIN_WAIT_MS).toBe(0);
  });

  it("holds 2048 jobs and 100000 rows at most by default", () => {
    expect(loadConfig({}).WORKER_CONCURRENCY).toBe(2_048);
    expect(loadConfig({}).WORKER_MAX_ROWS_IN_HAND).toBe(100_000);
  });

  it("goes early at most once per BATCH_MAX_WAIT_MS unless BATCH_MIN_INTERVAL_MS says", () => {
    expect(loadConfig({}).BATCH_MIN_INTERVAL_MS).toBe(1_000);
    expect(loadConfig({ BATCH_MAX_WAIT_MS: "60000" }).BATCH_MIN_INTERVAL_MS).toBe(60_000);
    expect(loadConfig({ BATCH_MIN_INTERVAL_MS: "0" }).BATCH_MIN_INTERVAL_MS).toBe(0);
    expect(loadConfig({ BATCH_MIN_INTERVAL_MS: "300" }).BATCH_MIN_INTERVAL_MS).toBe(300);
  });

  it("migrates on start on one node, and on a cluster only when asked", () => {
    const cluster = { CLICKHOUSE_URL: "http://ch:8123", CLICKHOUSE_CLUSTER: "eu" };
    expect(migratesOnStart(loadConfig({}))).toBe(true);
    expect(migratesOnStart(loadConfig({ MIGRATE_ON_START: "false" }))).toBe(false);
    expect(migratesOnStart(loadConfig(cluster))).toBe(false);
    expect(migratesOnStart(loadConfig({ ...cluster, MIGRATE_ON_START: "true" }))).toBe(true);
  });

  it("takes TRUST_PROXY as a hop count or proxies' addresses, never as trust-all", () => {
    expect(loadConfig({ TRUST_PROXY: "false" }).TRUST_PROXY).toBe(false);
    expect(loadConfig({ TRUST_PROXY: "2" }).TRUST_PROXY).toBe(2);
    expect(
      loadConfig({ TRUST_PROXY: "10.0.0.0/8, 192.0.2.7,fd00::/8,loopback" }).TRUST_PROXY,
    ).toEqual(["10.0.0.0/8", "192.0.2.7", "fd00::/8", "loopback"]);
    for (const bad of ["true", "yes", "on", "10.0.0.0/33", "proxy.example.com", "99"]) {
      expect(() => loadConfig({ TRUST_PROXY: bad }), bad).toThrow(/TRUST_PROXY/);
    }
  });

  it("takes an empty or blank value as unset", () => {
    const c = loadConfig({ PORT: "", CLICKHOUSE_URL: "", LOG_LEVEL: "" });
    expect(c.PORT).toBe(3000);
    expect(c.CLICKHOUSE_URL).toBeUndefined();
    expect(c.LOG_LEVEL).toBe("info");
    // Not 0, which a number read from "  " would be: the memory gate off, a random port.
    const blank = loadConfig({ PORT: "  ", REDIS_MEMORY_MAX_RATIO: " \t" });
    expect([blank.PORT, blank.REDIS_MEMORY_MAX_RATIO]).toEqual([
      3000,
      loadConfig({}).REDIS_MEMORY_MAX_RATIO,
    ]);
  });

  it("refuses a duration longer than a timer can wait (Node would fire it after 1 ms)", () => {
    expect(loadConfig({ BACKLOG_CHECK_INTERVAL_MS: "2147483647" }).BACKLOG_CHECK_INTERVAL_MS).toBe(
      2_147_483_647,
    );
    expect(configError({ BACKLOG_CHECK_INTERVAL_MS: "2147483648" })).toMatch(
      /BACKLOG_CHECK_INTERVAL_MS/,
    );
    for (const name of CONFIG_KEYS.filter((k) => k.endsWith("_MS"))) {
      expect(configError({ [name]: "2147483648" }), name).toContain(name);
    }
  });

  it("ignores variables it does not know: the config is the same, and does not carry them", () => {
    const unknown = { HOME: "/root", NODE_ENV: "test", HEADROOM_NO_SUCH_THING: "1", PORTS: "9" };
    const c = loadConfig({ ...unknown, PORT: "4100" });
    expect(c).toEqual(loadConfig({ PORT: "4100" }));
    for (const name of Object.keys(unknown)) expect(c).not.toHaveProperty(name);
    expect(Object.keys(c).filter((k) => !(CONFIG_KEYS as string[]).includes(k))).toEqual([]);
  });

  it.each([
    ["PORT", "abc"],
    ["PORT", "70000"],
    ["PORT", "3.5"],
    ["LOG_LEVEL", "loud"],
    ["LOG_REQUESTS", "maybe"],
    ["REDIS_URL", "http://127.0.0.1:6379"],
    ["CLICKHOUSE_URL", "not a url"],
    ["CLICKHOUSE_DATABASE", "drop table; --"],
    ["CLICKHOUSE_CLUSTER", "x' SETTINGS a = 1"],
    ["REDIS_MEMORY_MAX_RATIO", "2"],
    ["STACK_REDIS_PORT", "0"],
    ["METRICS_TOKEN", "short"],
  ])("names %s in the error for %j", (name, value) => {
    expect(configError({ [name]: value })).toMatch(new RegExp(`^\\s+${name}: `, "m"));
  });

  it("takes a ClickHouse cluster only with a server to reach it through", () => {
    const url = "http://ch-1.internal:8123";
    const c = loadConfig({ CLICKHOUSE_CLUSTER: "analytics-eu_2", CLICKHOUSE_URL: url });
    expect(c.CLICKHOUSE_CLUSTER).toBe("analytics-eu_2");
    expect(loadConfig({}).CLICKHOUSE_CLUSTER).toBeUndefined();
    expect(configError({ CLICKHOUSE_CLUSTER: "analytics" })).toMatch(
      /^\s+CLICKHOUSE_CLUSTER: needs CLICKHOUSE_URL/m,
    );
  });

  it("names every bad variable at once", () => {
    const message = configError({ PORT: "x", BATCH_MAX_ROWS: "0" });
    expect(message).toMatch(/^\s+PORT: /m);
    expect(message).toMatch(/^\s+BATCH_MAX_ROWS: /m);
  });

  it("bounds RETENTION_DAYS to ten years: TTLs past 2106 wrap round and expire every row", () => {
    expect(loadConfig({ RETENTION_DAYS: "3660" }).RETENTION_DAYS).toBe(3_660);
    expect(configError({ RETENTION_DAYS: "3661" })).toMatch(/^\s+RETENTION_DAYS: /m);
  });

  it("never repeats a bad value, which could be a secret", () => {
    const secret = "redis://:s3cret-password@host:6379";
    expect(configError({ REDIS_URL: secret.replace("redis", "ftp") })).not.toContain("s3cret");
  });

  it("merges PLANS over the defaults and checks its JSON", () => {
    const c = loadConfig({
      PLANS: '{"team":{"monthly":200000,"burst":500}}',
      DEFAULT_PLAN: "team",
    });
    expect((c.PLANS as Record<string, unknown>).team).toEqual({ monthly: 200_000, burst: 500 });
    expect(c.PLANS.free).toEqual(DEFAULT_PLANS.free);
    expect(c.DEFAULT_PLAN).toBe("team");
    expect(configError({ PLANS: "{not json" })).toMatch(/PLANS: must be JSON/);
    expect(configError({ PLANS: '{"x":{"monthly":-1,"burst":1}}' })).toMatch(/PLANS\.x\.monthly/);
  });

  it("refuses a DEFAULT_PLAN that is not a plan, inherited names included", () => {
    expect(configError({ DEFAULT_PLAN: "gold" })).toMatch(/DEFAULT_PLAN: unknown plan "gold"/);
    expect(configError({ DEFAULT_PLAN: "constructor" })).toMatch(/DEFAULT_PLAN: unknown plan/);
  });

  it("takes no replica wait longer than the edge's Redis commands may last", () => {
    // A WAIT is cut by the connection's command timeout: a longer setting would not mean it.
    expect(loadConfig({ REDIS_ACK_TIMEOUT_MS: "4000" }).REDIS_ACK_TIMEOUT_MS).toBe(4_000);
    expect(configError({ REDIS_ACK_TIMEOUT_MS: "10000" })).toMatch(/REDIS_ACK_TIMEOUT_MS: .*4000/);
  });

  it("puts the embedded ClickHouse in the data directory unless CLICKHOUSE_PATH says otherwise", () => {
    expect(loadConfig({}).CLICKHOUSE_PATH).toBe(".data/clickhouse");
    expect(loadConfig({ HEADROOM_DATA_DIR: "/tmp/hr" }).CLICKHOUSE_PATH).toBe("/tmp/hr/clickhouse");
    expect(
      loadConfig({ HEADROOM_DATA_DIR: "/tmp/hr", CLICKHOUSE_PATH: "/srv/ch" }).CLICKHOUSE_PATH,
    ).toBe("/srv/ch");
  });
});

describe("isSet", () => {
  it("follows loadConfig: empty means unset", () => {
    expect(isSet({ REDIS_URL: "redis://h:1" }, "REDIS_URL")).toBe(true);
    expect(isSet({ REDIS_URL: "" }, "REDIS_URL")).toBe(false);
    expect(isSet({ REDIS_URL: "  " }, "REDIS_URL")).toBe(false);
    expect(isSet({}, "REDIS_URL")).toBe(false);
  });
});
