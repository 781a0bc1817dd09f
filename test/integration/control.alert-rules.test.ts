import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alertKeys } from "../../src/alerts/keys.js";
import { createControl } from "../../src/control/service.js";
import type { RedisClient } from "../../src/redis/connections.js";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";

// An alert rule's update racing its removal, made deterministic: the removal is run at the moment
// the update's read is done and its write is about to go (a Redis client that runs it before the
// first command that would write the rule's hash). The rule must end removed: not listed, nothing
// left of it that cannot be removed.

let s: ControlStack;
let admin: string;
let project: string;

beforeAll(async () => {
  s = await startControlStack(7);
  project = `c-${s.tag}`;
  await s.control.createProject(s.cli, { project });
  admin = (await s.control.createKey(s.cli, null, { scope: "admin" })).key;
}, 120_000);

afterAll(async () => {
  await s?.close();
});

const rule = (warn: number) => ({
  metric: "requests",
  warn_pct: warn,
  critical_pct: 95,
  webhook: "http://127.0.0.1:9/hook",
});

/** Reads of a hash: anything else naming `key` is a write, and `before` runs first (once). */
const READS = new Set(["hget", "hgetall", "hexists", "hlen", "hkeys", "hvals", "hmget"]);
function beforeFirstWrite(redis: RedisClient, key: string, before: () => Promise<unknown>) {
  let ran = false;
  return new Proxy(redis, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (!ran && !READS.has(String(prop)) && args.includes(key)) {
          ran = true;
          return before().then(() => value.apply(target, args));
        }
        return value.apply(target, args);
      };
    },
  }) as RedisClient;
}

describe("alert rules", () => {
  it("an update racing the rule's removal leaves no rule behind: not listed, none to remove", async () => {
    const made = await s.call("POST", `/api/v1/projects/${project}/alert-rules`, admin, rule(70));
    expect(made.statusCode, made.body).toBe(201);
    const id: string = made.json().id;
    const rulesKey = alertKeys(s.p.config.QUEUE_PREFIX).rules(project);
    let removal: number | undefined;
    const racing = createControl(
      beforeFirstWrite(s.p.redis, rulesKey, async () => {
        removal = (await s.call("DELETE", `/api/v1/alert-rules/${id}`, admin)).statusCode;
      }),
      s.p.config,
    );

    const update = await racing.updateRule(s.cli, id, rule(60)).then(
      () => 200,
      (err: { status?: number }) => err.status ?? 500,
    );
    expect(removal).toBe(200);
    expect(update).toBe(404);
    const listed = await s.call("GET", `/api/v1/projects/${project}/alert-rules`, admin);
    expect(listed.json().items.map((r: { id: string }) => r.id)).not.toContain(id);
    expect(await s.redis.hexists(rulesKey, id)).toBe(0);
    expect((await s.call("GET", `/api/v1/alert-rules/${id}`, admin)).statusCode).toBe(404);
  });

  it("an update of a rule still there is written, by the same script", async () => {
    const made = await s.call("POST", `/api/v1/projects/${project}/alert-rules`, admin, rule(70));
    const id: string = made.json().id;
    const updated = await s.call("PUT", `/api/v1/alert-rules/${id}`, admin, rule(60));
    expect(updated.statusCode, updated.body).toBe(200);
    const read = await s.call("GET", `/api/v1/alert-rules/${id}`, admin);
    expect(read.json()).toMatchObject({ id, warn_pct: 60, created_at: made.json().created_at });
  });
});
