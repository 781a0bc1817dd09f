import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type AuditEntry, createAuditLog } from "../../src/control/audit.js";
import { uniqueId } from "../helpers/edge-fixture.js";

// The audit log in a real Redis: pages, newest first by (time, id), give every entry exactly
// once whatever the page size, entries of one millisecond included; entries older than the
// retention are gone. A clock is injected: no waiting.

let redis: Redis;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});

afterAll(async () => {
  await redis?.quit();
});

const entry = (n: number) => ({
  actor: { key_id: null, kind: "cli" as const, user: "t" },
  source: "host",
  action: "key.create",
  project: "p",
  target: `key_${n}`,
  before: null,
  after: { n },
});

describe("audit log", () => {
  it("pages newest first, each entry once, whatever the page size (ties included)", async () => {
    await fc.assert(
      fc.asyncProperty(
        // Times within a few milliseconds: many entries share one.
        fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 7 }),
        async (offsets, limit) => {
          const prefix = `t-audit-${uniqueId()}`;
          let t = 0;
          const log = createAuditLog(redis, { retentionDays: 365, now: () => t, prefix });
          const base = Date.now();
          const written: { t: number; e: AuditEntry }[] = [];
          for (const [i, off] of offsets.entries()) {
            t = base + off;
            written.push({ t, e: await log.write(entry(i)) });
          }
          t = base + 10;
          const seen: AuditEntry[] = [];
          let after: { t: number; id: string } | undefined;
          for (let pages = 0; pages <= offsets.length; pages++) {
            const rows = await log.read({ project: "p", limit, after });
            const page = rows.slice(0, limit);
            seen.push(...page.map((r) => r.entry));
            const last = page.at(-1);
            if (rows.length <= limit || !last) break;
            after = { t: last.t, id: last.entry.id };
          }
          const expected = written
            .sort((a, b) => b.t - a.t || (b.e.id < a.e.id ? -1 : b.e.id > a.e.id ? 1 : 0))
            .map((w) => w.e);
          expect(seen).toEqual(expected);
          await redis.del(`${prefix}:audit`, `${prefix}:audit:p`);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("entries older than AUDIT_RETENTION_DAYS are removed", async () => {
    const prefix = `t-audit-${uniqueId()}`;
    const day = 86_400_000;
    let t = Date.now();
    const log = createAuditLog(redis, { retentionDays: 2, now: () => t, prefix });
    const old = await log.write(entry(1));
    t += day;
    const newer = await log.write(entry(2));
    t += day + 1;
    // The first is now older than two days; the second is not.
    const rows = await log.read({ limit: 10 });
    expect(rows.map((r) => r.entry.id)).toEqual([newer.id]);
    const ofProject = await log.read({ project: "p", limit: 10 });
    expect(ofProject.map((r) => r.entry.id)).toEqual([newer.id]);
    expect(await redis.zcard(`${prefix}:audit`)).toBe(1);
    expect(await redis.zcard(`${prefix}:audit:p`)).toBe(1);
    expect(old.id).not.toBe(newer.id);
    await redis.del(`${prefix}:audit`, `${prefix}:audit:p`);
  });
});
