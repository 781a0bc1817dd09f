import { execFile } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuleStore } from "../../src/alerts/rule-store.js";
import { loadConfig } from "../../src/config.js";
import { createDeclarationsStore } from "../../src/control/declarations-store.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { hashKey } from "../../src/keys/key-format.js";
import { KEY_STORE_PREFIX } from "../../src/keys/key-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import { createCliRedis, type RedisClient } from "../../src/redis/connections.js";
import { redisTopology } from "../../src/redis/topology.js";
import { clientReport } from "../helpers/edge-fixture.js";

// `headroom backup` / `headroom restore` as an operator runs them: keys, plans, alert rules and
// webhook secrets taken from one Redis, and restored into a new, empty one, where the old key is
// accepted by the edge again; restored over a Redis in use, only with --merge, and then without
// undoing what was done since the backup. Each Redis is a server of this file's own.

const dir = mkdtempSync(join(tmpdir(), "headroom-backup-"));
const file = join(dir, "backup.json");
const QUEUE_PREFIX = "{hr-backup}";
const logger = createLogger("silent", "test");
let before: RedisServer;
let after: RedisServer;
const clients: RedisClient[] = [];
const edges: Edge[] = [];

function headroom(args: string[], redisUrl: string) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ["bin/headroom.mjs", ...args],
      {
        env: {
          PATH: process.env.PATH,
          REDIS_URL: redisUrl,
          QUEUE_PREFIX,
          HEADROOM_DATA_DIR: join(dir, "no-stack"),
        },
        timeout: 60_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? -1) : 0, stdout, stderr }),
    );
  });
}

// No key cache: the edge on the new Redis asks Redis itself, before and after the restore.
const configFor = (redisUrl: string) =>
  loadConfig({ REDIS_URL: redisUrl, QUEUE_PREFIX, METRICS_PORT: "0", KEY_CACHE_TTL_MS: "0" });

function redisAt(url: string): RedisClient {
  const redis = createCliRedis(redisTopology(configFor(url)));
  clients.push(redis);
  return redis;
}

async function edgeAt(url: string): Promise<Edge> {
  const edge = await createEdge(configFor(url), logger);
  edges.push(edge);
  return edge;
}

async function post(edge: Edge, key: string) {
  const res = await edge.app.inject({
    method: "POST",
    url: "/api/report",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(clientReport()),
  });
  return res.statusCode;
}

beforeAll(async () => {
  before = await startRedisServer({ dir: join(dir, "before") });
  after = await startRedisServer({ dir: join(dir, "after") });
});

afterAll(async () => {
  for (const e of edges) await e.close();
  for (const c of clients) c.disconnect();
  await before?.stop();
  await after?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("headroom backup and restore", () => {
  it("brings every key, plan, rule and secret back into an empty Redis", async () => {
    const old = await edgeAt(before.url);
    const { key } = await old.keyStore.create("acme", { plan: "pro", defaultPlan: "unlimited" });
    await old.keyStore.setPlan("acme", "free", { monthly: 1234 });
    const { rule, secret } = await createRuleStore(redisAt(before.url), QUEUE_PREFIX).create({
      project: "acme",
      metric: "requests",
      warn_pct: 70,
      critical_pct: 90,
      webhook: "https://hooks.example/acme",
    });
    const limits = [
      {
        provider: "bedrock",
        model: "anthropic.claude-3-haiku",
        pool: null,
        dimension: "requests" as const,
        window: "1m" as const,
        limit: 60,
      },
    ];
    await createDeclarationsStore(redisAt(before.url), QUEUE_PREFIX).replace(
      "acme",
      "limits",
      limits,
    );
    expect(await post(old, key)).toBe(200);

    const backedUp = await headroom(["backup", file], before.url);
    expect(backedUp.code, backedUp.stderr).toBe(0);
    expect(statSync(file).mode & 0o077).toBe(0);
    // Over a file that others could read: it is made private too.
    const open = join(dir, "world-readable.json");
    writeFileSync(open, "{}", { mode: 0o644 });
    chmodSync(open, 0o644);
    expect((await headroom(["backup", open], before.url)).code).toBe(0);
    expect(statSync(open).mode & 0o777).toBe(0o600);
    const written = JSON.parse(readFileSync(file, "utf8")) as { keys: unknown[] };
    expect(JSON.stringify(written)).not.toContain(key);
    // `-`: the same document on standard output, as `docker compose exec -T` passes it on.
    const piped = await headroom(["backup", "-"], before.url);
    expect(piped.code, piped.stderr).toBe(0);
    expect((JSON.parse(piped.stdout) as { keys: unknown[] }).keys).toEqual(written.keys);

    // A new Redis: the key is unknown there until the backup is restored.
    const fresh = await edgeAt(after.url);
    expect(await post(fresh, key)).toBe(401);
    const restored = await headroom(["restore", file], after.url);
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stdout).toMatch(/^restored \d+ keys/);

    expect(await post(fresh, key)).toBe(200);
    expect(await fresh.keyStore.getProject("acme")).toMatchObject({
      plan: "free",
      overrides: { monthly: 1234 },
    });
    const rules = createRuleStore(redisAt(after.url), QUEUE_PREFIX);
    expect(await rules.get(rule.id)).toEqual(rule);
    expect(await rules.secret(rule.id)).toBe(secret);
    const declared = await createDeclarationsStore(redisAt(after.url), QUEUE_PREFIX).load("acme");
    expect(declared.declarations).toEqual({ limits, pools: [] });
  });

  it("refuses a file that is not a backup, and says why", async () => {
    const bad = await headroom(["restore", join(dir, "missing.json")], after.url);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("missing.json");
  });

  it("over a Redis in use: refused unless --merge, and a merge undoes no revocation, rotation, removal or plan change", async () => {
    const live = await edgeAt(before.url);
    const redis = redisAt(before.url);
    const rules = createRuleStore(redis, QUEUE_PREFIX);
    const revoked = await live.keyStore.create("globex", { plan: "pro", defaultPlan: "unlimited" });
    const lost = await live.keyStore.create("initech", { plan: "pro", defaultPlan: "unlimited" });
    const rotated = await live.keyStore.create("globex", { plan: "pro", defaultPlan: "unlimited" });
    const { rule } = await rules.create({
      project: "globex",
      metric: "requests",
      warn_pct: 70,
      critical_pct: 90,
      webhook: "https://hooks.example/globex",
    });
    const declarations = createDeclarationsStore(redis, QUEUE_PREFIX);
    const pool = (label: string) => [{ provider: "openai", label, apps: ["chat"] }];
    await declarations.replace("globex", "pools", pool("old"));
    await declarations.replace("initech", "pools", pool("lost"));
    const taken = join(dir, "live.json");
    const backedUp = await headroom(["backup", taken], before.url);
    expect(backedUp.code, backedUp.stderr).toBe(0);

    // Since the backup: a key revoked, one rotated, a rule removed, a plan lowered; one key lost.
    expect(await live.keyStore.revoke(revoked.keyId)).toBe(true);
    const secret = await live.keyStore.rotate(rotated.keyId, 0);
    expect(await rules.remove(rule.id)).toBe(true);
    await live.keyStore.setPlan("globex", "free");
    await redis.del(`${KEY_STORE_PREFIX}:key:${hashKey(lost.key)}`);
    await declarations.replace("globex", "pools", pool("new"));
    await declarations.replace("initech", "pools", []);
    expect(await post(live, revoked.key)).toBe(401);
    expect(await post(live, lost.key)).toBe(401);

    const refused = await headroom(["restore", taken], before.url);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("not empty");
    expect(refused.stderr).toContain("--merge");
    expect(await post(live, revoked.key)).toBe(401);

    const merged = await headroom(["restore", "--merge", taken], before.url);
    expect(merged.code, merged.stderr).toBe(0);
    expect(merged.stdout).toMatch(/^merged \d+ keys/);
    expect(merged.stdout).toContain(`skipped key ${revoked.keyId}: revoked here`);
    expect(merged.stdout).toContain(`skipped alert rule ${rule.id}: removed at`);
    expect(merged.stdout).toContain("skipped plan of project globex: free set here at");
    expect(merged.stdout).toContain("skipped declared pools of project globex: set here");

    // What it lacked is back; what was taken away stays away.
    expect(await post(live, lost.key)).toBe(200);
    expect(await post(live, revoked.key)).toBe(401);
    // The key id still names the rotated secret (a string Redis has is newer than the backup's).
    expect(await live.keyStore.get(rotated.keyId)).toMatchObject({ revoked: false });
    expect((await live.keyStore.get(rotated.keyId))?.rotatedAt).toBe(secret?.rotatedAt);
    expect(await post(live, secret?.key as string)).toBe(200);
    expect(await rules.get(rule.id)).toBeNull();
    expect(await rules.secret(rule.id)).toBeNull();
    expect((await rules.list("globex")).map((r) => r.id)).not.toContain(rule.id);
    expect(await live.keyStore.getProject("globex")).toMatchObject({ plan: "free", overrides: {} });
    // Declarations set here stand; a project's missing here come back (as a lost key does).
    expect((await declarations.load("globex")).declarations.pools).toEqual(pool("new"));
    expect((await declarations.load("initech")).declarations.pools).toEqual(pool("lost"));
  });
});
