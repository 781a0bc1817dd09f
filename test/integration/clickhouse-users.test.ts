import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClickHouseClient } from "@clickhouse/client";
import { drainPending, Session } from "chdb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClickHouse } from "../../src/clickhouse/client.js";

// The compose deployment's ClickHouse users (deploy/clickhouse/users.d/headroom.xml) as the real
// engine loads them: each with its password from the environment, the grants as ClickHouse
// parses them, and the reader's profile read-only. The embedded engine does not enforce access
// control (it runs as one local user), so statements run as each user only on a server: the
// compose stack's container test (test/docker/compose.test.ts) with the official image.

const dir = mkdtempSync(join(tmpdir(), "headroom-ch-users-"));
let session: Session;
let client: ClickHouseClient;

/** The file as the server image merges it: beside users.xml's admin, profile and quota. */
function usersConfig(): string {
  const ours = readFileSync("deploy/clickhouse/users.d/headroom.xml", "utf8");
  return ours
    .replace(
      "<users>",
      `<users><default><password></password><networks><ip>::/0</ip></networks>
        <profile>default</profile><quota>default</quota>
        <access_management>1</access_management></default>`,
    )
    .replace("<profiles>", "<profiles><default />")
    .replace("<clickhouse>", "<clickhouse><quotas><default /></quotas>");
}

async function rows<T>(query: string): Promise<T[]> {
  const rs = await client.query({ query, format: "JSONEachRow" });
  return rs.json<T>();
}

/** A user's grants, as ClickHouse renders them, without the user's name. */
async function grantsOf(user: string): Promise<string[]> {
  const shown = await rows<Record<string, string>>(`SHOW GRANTS FOR ${user}`);
  return shown.map((r) => (Object.values(r)[0] ?? "").replace(` TO ${user}`, "")).sort();
}

beforeAll(async () => {
  process.env.CLICKHOUSE_MIGRATE_PASSWORD = "migrate-secret";
  process.env.CLICKHOUSE_WRITER_PASSWORD = "writer-secret";
  process.env.CLICKHOUSE_READER_PASSWORD = "reader-secret";
  writeFileSync(join(dir, "users.xml"), usersConfig());
  writeFileSync(
    join(dir, "config.xml"),
    `<clickhouse><users_config>${join(dir, "users.xml")}</users_config></clickhouse>`,
  );
  const path = join(dir, "data");
  session = new Session(path, { connectionArgs: [`--config-file=${join(dir, "config.xml")}`] });
  client = createClickHouse({
    CLICKHOUSE_PATH: path,
    CLICKHOUSE_USER: "default",
    CLICKHOUSE_PASSWORD: "",
    CLICKHOUSE_DATABASE: "headroom",
    CLICKHOUSE_REQUEST_TIMEOUT_MS: 60_000,
  });
});

afterAll(async () => {
  await client?.close();
  session?.close();
  await drainPending();
  rmSync(dir, { recursive: true, force: true });
});

describe("ClickHouse users of the compose deployment", () => {
  it("loads each role's user with a password from the environment", async () => {
    const users = await rows<{ name: string; auth_type: string[] }>(
      "SELECT name, auth_type FROM system.users WHERE name LIKE 'headroom_%' ORDER BY name",
    );
    expect(users.map((u) => u.name)).toEqual([
      "headroom_migrate",
      "headroom_reader",
      "headroom_writer",
    ]);
    for (const u of users) expect(u.auth_type, u.name).not.toContain("no_password");
  });

  it("gives the migrate user the schema's DDL on Headroom's database only", async () => {
    const [grant, ...more] = await grantsOf("headroom_migrate");
    expect(more).toEqual([]);
    expect(grant).toMatch(/^GRANT .* ON headroom\.\*$/);
    for (const privilege of [
      "SELECT",
      "INSERT",
      "ALTER",
      "CREATE DATABASE",
      "CREATE TABLE",
      "CREATE VIEW",
      "DROP VIEW",
    ]) {
      expect(grant).toContain(privilege);
    }
    expect(grant).not.toMatch(/DROP TABLE|DROP DATABASE|TRUNCATE/);
  });

  it("lets the workers' user insert into the two tables they write, and read report ids (dlq replay's check)", async () => {
    expect(await grantsOf("headroom_writer")).toEqual([
      "GRANT INSERT ON headroom.alert_events",
      "GRANT INSERT, SELECT(project_id, report_id) ON headroom.reports",
    ]);
  });

  it("lets the reader read, under a read-only profile", async () => {
    const grants = await grantsOf("headroom_reader");
    expect(grants).toHaveLength(1);
    expect(grants[0]).toMatch(/^GRANT (SHOW, SELECT|SELECT, SHOW) ON headroom\.\*$/);
    const [readonly] = await rows<{ value: string }>(
      "SELECT value FROM system.settings_profile_elements WHERE profile_name = 'headroom_reader' AND setting_name = 'readonly'",
    );
    expect(readonly?.value).toBe("2");
  });
});
