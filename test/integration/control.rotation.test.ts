import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";
import { clientReport } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";

// Rotation: a new secret for the same key; during the overlap both secrets work on every edge
// (two edge processes' apps on one Redis, each with its own key cache), after it only the new
// one, on both, within the same bound as a revocation (KEY_CACHE_TTL_MS). No sleeping: the end
// is polled for, and the old secret must never fail before it.

let s: ControlStack;
let second: Edge;
let project: string;
const KEY_CACHE_TTL_MS = 500;

beforeAll(async () => {
  s = await startControlStack(10, { KEY_CACHE_TTL_MS: String(KEY_CACHE_TTL_MS) });
  second = await createEdge(s.p.config, createLogger("silent", "test"));
  project = `c-${s.tag}`;
  await s.control.createProject(s.cli, { project });
}, 120_000);

afterAll(async () => {
  await second?.close();
  await s?.close();
});

const post = (edge: Edge, key: string) =>
  edge.app.inject({
    method: "POST",
    url: "/api/report",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(clientReport()),
  });
const edges = () => [s.edge, second];
const statuses = async (key: string) =>
  Promise.all(edges().map(async (e) => (await post(e, key)).statusCode));

async function newKey(): Promise<{ key: string; keyId: string }> {
  const made = await s.control.createKey(s.cli, project, { scope: "report" });
  return { key: made.key, keyId: made.key_id };
}

describe("rotation", () => {
  it("both secrets work on both edges during the overlap, only the new one after it", async () => {
    const old = await newKey();
    // Both edges hold the old secret in their caches, as a busy deployment would.
    expect(await statuses(old.key)).toEqual([200, 200]);

    const overlapS = 3;
    const res = await s.call(
      "POST",
      `/api/v1/keys/${old.keyId}/rotate`,
      (await s.control.createKey(s.cli, null, { scope: "admin" })).key,
      { expires_in_s: overlapS },
    );
    expect(res.statusCode, res.body).toBe(200);
    const rotated = res.json();
    expect(rotated.key_id).toBe(old.keyId);
    expect(rotated.key).not.toBe(old.key);
    expect(rotated.key).toMatch(/^hr_/);
    const end = Date.parse(rotated.old_key_expires_at);

    // During the overlap: both, on both edges (checked well before its end).
    expect(await statuses(rotated.key)).toEqual([200, 200]);
    const during = await statuses(old.key);
    expect(Date.now()).toBeLessThan(end - 500);
    expect(during).toEqual([200, 200]);

    // After it: the old secret fails on both edges, never before its end; the new one works.
    await eventually(
      async () => {
        const sent = Date.now();
        const codes = await statuses(old.key);
        const answered = Date.now();
        for (const code of codes) {
          // A refusal is never seen before the end; an answer wholly before it is a success.
          if (code === 401) expect(answered).toBeGreaterThanOrEqual(end);
          else expect(code).toBe(200);
          if (answered < end) expect(code, `sent at ${sent}`).toBe(200);
        }
        expect(codes).toEqual([401, 401]);
      },
      { timeoutMs: overlapS * 1000 + KEY_CACHE_TTL_MS + 5_000, intervalMs: 50 },
    );
    expect(await statuses(rotated.key)).toEqual([200, 200]);
    // The key is the same key: one row in the project's list, not revoked.
    const listed = (await s.control.listKeys(s.cli, project)).filter((k) => k.key_id === old.keyId);
    expect(listed).toHaveLength(1);
    expect(listed[0]?.revoked).toBe(false);
    expect(listed[0]?.rotated_at).toBe(rotated.rotated_at);
  }, 30_000);

  it("expires_in_s 0 ends the old secret within the revocation bound, on both edges", async () => {
    const old = await newKey();
    expect(await statuses(old.key)).toEqual([200, 200]);
    const rotated = await s.control.rotateKey(s.cli, old.keyId, 0);
    const at = Date.now();
    await eventually(async () => expect(await statuses(old.key)).toEqual([401, 401]), {
      timeoutMs: KEY_CACHE_TTL_MS + 2_000,
      intervalMs: 25,
    });
    expect(Date.now() - at).toBeLessThan(KEY_CACHE_TTL_MS + 1_000);
    expect(await statuses(rotated.key)).toEqual([200, 200]);
  });

  it("revoking a rotated key ends the old secret too, within its overlap", async () => {
    const old = await newKey();
    const rotated = await s.control.rotateKey(s.cli, old.keyId, 3_600);
    expect(await statuses(old.key)).toEqual([200, 200]);
    expect(await statuses(rotated.key)).toEqual([200, 200]);
    await s.control.revokeKey(s.cli, old.keyId);
    await eventually(
      async () => {
        expect(await statuses(old.key)).toEqual([401, 401]);
        expect(await statuses(rotated.key)).toEqual([401, 401]);
      },
      { timeoutMs: KEY_CACHE_TTL_MS + 2_000, intervalMs: 25 },
    );
    const again = await s.call("POST", `/api/v1/keys/${old.keyId}/rotate`, undefined);
    expect(again.statusCode).toBe(401);
  });

  it("a rotation with expires_in_s 0 ends every earlier secret, not only the last one", async () => {
    const first = await newKey();
    const second = await s.control.rotateKey(s.cli, first.keyId, 30 * 86_400);
    expect(await statuses(first.key)).toEqual([200, 200]);
    const third = await s.control.rotateKey(s.cli, first.keyId, 0);
    await eventually(
      async () => {
        expect(await statuses(first.key)).toEqual([401, 401]);
        expect(await statuses(second.key)).toEqual([401, 401]);
      },
      { timeoutMs: KEY_CACHE_TTL_MS + 2_000, intervalMs: 25 },
    );
    expect(await statuses(third.key)).toEqual([200, 200]);
  });

  it("rotations at once leave no secret that a later rotation or revocation does not end", async () => {
    const old = await newKey();
    const made = await Promise.all(
      Array.from({ length: 4 }, () => s.control.rotateKey(s.cli, old.keyId, 30 * 86_400)),
    );
    const last = await s.control.rotateKey(s.cli, old.keyId, 0);
    await eventually(
      async () => {
        for (const secret of [old.key, ...made.map((m) => m.key)])
          expect(await statuses(secret)).toEqual([401, 401]);
      },
      { timeoutMs: KEY_CACHE_TTL_MS + 2_000, intervalMs: 25 },
    );
    expect(await statuses(last.key)).toEqual([200, 200]);
    // A revocation racing rotations leaves nothing working either.
    const racing = await Promise.allSettled([
      s.control.rotateKey(s.cli, old.keyId, 3_600),
      s.control.revokeKey(s.cli, old.keyId),
      s.control.rotateKey(s.cli, old.keyId, 3_600),
    ]);
    const secrets = [
      last.key,
      ...racing.flatMap((r) =>
        r.status === "fulfilled" && r.value && "key" in r.value ? [String(r.value.key)] : [],
      ),
    ];
    // Rotations before the revocation are ended by it; those after it find the key revoked.
    await eventually(
      async () => {
        for (const secret of secrets) expect(await statuses(secret)).toEqual([401, 401]);
      },
      { timeoutMs: KEY_CACHE_TTL_MS + 2_000, intervalMs: 25 },
    );
  });

  it("an overlap past 30 days (2592000 s) is refused, over HTTP and from the CLI alike", async () => {
    const old = await newKey();
    const admin = (await s.control.createKey(s.cli, null, { scope: "admin" })).key;
    const rotate = (expires_in_s: number) =>
      s.call("POST", `/api/v1/keys/${old.keyId}/rotate`, admin, { expires_in_s });
    const before = (await s.control.listKeys(s.cli, project)).find((k) => k.key_id === old.keyId);

    const over = await rotate(2_592_001);
    expect(over.statusCode, over.body).toBe(400);
    expect(over.json().error).toBe("invalid_body");
    const cliOver = await s.headroom(["keys", "rotate", old.keyId, "--expires-in", "2592001s"]);
    expect(cliOver.code).not.toBe(0);
    expect(cliOver.stderr).toContain("2592000");
    const cliDays = await s.headroom(["keys", "rotate", old.keyId, "--expires-in", "31d"]);
    expect(cliDays.code).not.toBe(0);
    // Neither rotated: the key's secret is the one it had, still the only one working.
    const after = (await s.control.listKeys(s.cli, project)).find((k) => k.key_id === old.keyId);
    expect(after?.rotated_at).toBe(before?.rotated_at);
    expect(await statuses(old.key)).toEqual([200, 200]);

    // The bound itself is allowed, by both.
    const at = await rotate(2_592_000);
    expect(at.statusCode, at.body).toBe(200);
    const end = Date.parse(at.json().old_key_expires_at) - Date.parse(at.json().rotated_at);
    expect(end).toBe(2_592_000_000);
    const cliAt = await s.headroom(["keys", "rotate", old.keyId, "--expires-in", "30d", "--json"]);
    expect(cliAt.code, cliAt.stderr).toBe(0);
  }, 60_000);
});
