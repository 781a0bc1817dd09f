import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// One read key's distinct /usage queries (a useless extra filter value, or a new from/to each
// time) against the read API's memory and the other projects' cached answers: the caches are
// bounded by bytes in all and per project, so the process's memory stays under a stated bound
// and another project's answer is still served from the cache.

const MiB = 1_048_576;
const MAX_BYTES = 32 * MiB;
const PROJECT_PCT = 25;
/** Distinct queries of each kind the hostile key sends: past READ_CACHE_MAX_ENTRIES. */
const FLOOD = 24;
const MODELS = 4;
const MINUTES = 23 * 60;

let s: ReadStack;
let hostile: ProjectKeys;
let victim: ProjectKeys;

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
/** The process's JavaScript heap and buffers, after collecting what nothing holds. */
function liveBytes() {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

beforeAll(async () => {
  s = await startReadStack({
    READ_CACHE_TTL_MS: "60000",
    READ_CACHE_STALE_MS: "300000",
    READ_CACHE_MAX_ENTRIES: "16",
    READ_CACHE_MAX_BYTES: String(MAX_BYTES),
    READ_CACHE_PROJECT_PCT: String(PROJECT_PCT),
    READ_MAX_POINTS: "10000",
    // The read limit is not under test here: room for every request.
    READ_RATE_PER_S: "100000",
    READ_BURST: "1000000",
  });
  [hostile, victim] = [await s.project(), await s.project()];
  // The hostile project's data: a report a minute per model for 23 h, so its answers at minute
  // windows by model are ~5,500 points (~1.5 MB of JSON) each. Written straight to the table,
  // through its materialized views, as the workers would.
  await s.p.client.command({
    query: `INSERT INTO ${s.db}.reports (report_id, project_id, key_id, app, provider, model,
        timestamp, received_at, requests_limit, requests_remaining)
      SELECT generateUUIDv4(number), {project:String}, 'k', 'chat', 'openai',
        concat('model-', toString(number % ${MODELS})),
        now64(3) - toIntervalMinute(intDiv(number, ${MODELS}) + 1), now64(3), 1000, 500
      FROM numbers(${MODELS * MINUTES})`,
    query_params: { project: hostile.project },
  });
  await s.send(victim.report, [{ provider: "anthropic", model: "claude", limits: {} }]);
  await Promise.all([s.stored(hostile.project, MODELS * MINUTES), s.stored(victim.project, 1)]);
}, 120_000);

afterAll(async () => {
  await s?.close();
});

describe("one read key's distinct queries", () => {
  it("keep the read API's memory bounded and another project's answers cached", async () => {
    const hour = new Date(Date.now() - 3_600_000).toISOString();
    const victimUrls = ["/api/v1/usage", `/api/v1/usage?from=${hour}&window=hour`];
    const before = await Promise.all(victimUrls.map((u) => s.get(u, victim.read)));
    for (const r of before) expect(r.statusCode, r.body).toBe(200);
    // The victim's figures change: its cached answers do not show it until they expire.
    await s.send(victim.report, [{ provider: "anthropic", model: "claude", limits: {} }]);
    await s.stored(victim.project, 2);

    const base = liveBytes();
    const from = Date.now() - MINUTES * 60_000;
    for (let i = 0; i < FLOOD; i++) {
      // A useless filter value: the same points, a new cache key.
      const junk = await s.get(
        `/api/v1/usage?window=minute&group_by=model&provider=openai&provider=junk-${i}`,
        hostile.read,
      );
      expect(junk.statusCode, junk.body).toBe(200);
      expect(junk.json().points.length).toBeGreaterThan(5_000);
      // A new from each time: the rows' cache.
      const since = new Date(from + i * 1_000).toISOString();
      const ranged = await s.get(
        `/api/v1/usage?window=minute&group_by=model&from=${since}`,
        hostile.read,
      );
      expect(ranged.statusCode, ranged.body).toBe(200);
    }
    const grown = liveBytes() - base;

    // Two caches are in use here, the hostile project holding at most its share of each (a
    // quarter of MAX_BYTES): MAX_BYTES leaves room for what is not cached (buffers a request
    // still holds, the allocator's slack).
    expect(grown, `grew ${(grown / MiB).toFixed(1)} MiB`).toBeLessThan(MAX_BYTES);

    // Served from the caches: the answers as they were, without the victim's second report.
    const after = await Promise.all(victimUrls.map((u) => s.get(u, victim.read)));
    for (const [i, r] of after.entries()) {
      expect(r.statusCode).toBe(200);
      expect(r.body, victimUrls[i]).toBe(before[i]?.body);
    }
    // What the caches count: each under its bound, the hostile project under its share.
    for (const cache of Object.values(s.api.caches)) {
      expect(cache.usage().bytes).toBeLessThanOrEqual(MAX_BYTES);
      expect(cache.usage(hostile.project).bytes).toBeLessThanOrEqual(
        (MAX_BYTES * PROJECT_PCT) / 100,
      );
    }
  }, 120_000);
});
