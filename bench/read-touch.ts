// The readers' projects while they are read: every `everyMs`, one report per project and series
// timestamped now, so that each project's /usage answer changes at every refresh, as a busy
// project's does (the seeded history alone changes only when the minute turns, and an answer
// that did not change costs the API almost nothing to refresh). They go as a busy project's
// reports go: one batch per project to the edge (POST /api/reports), into the worker's batches
// beside the phase's load. Until 2026-11-29 they were inserted into ClickHouse directly, an
// insert a second that no deployment makes, which took about a fifth of the embedded engine's
// time from the readers' refreshes (issue 48).

export interface TouchResult {
  /** Batches the edge accepted, and their reports. */
  inserts: number;
  rows: number;
  failed: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

const PROVIDERS = ["openai", "anthropic", "google", "mistral"] as const;
const MODELS = ["small", "large"] as const;
const APPS = ["chat", "batch"] as const;

/** One report per series the seed gives every project (read-seed.ts): provider × model × app. */
function touchBatch(round: number): string {
  const timestamp = new Date().toISOString();
  const reports = APPS.flatMap((app) =>
    MODELS.flatMap((model) =>
      PROVIDERS.map((provider, i) => ({
        provider,
        model,
        app,
        timestamp,
        limits: {
          requests_limit: 10_000,
          requests_remaining: 10_000 - ((round + i) % 9_000),
          tokens_limit: 2_000_000,
          tokens_remaining: 1_000_000,
          reset_requests_ms: 60_000,
          reset_tokens_ms: 30_000,
        },
      })),
    ),
  );
  return JSON.stringify(reports);
}

/** Touches for `durationS`, counted as the edge answers. */
export async function touchProjects(opts: {
  edgeUrl: string;
  /** A report key of each reader's project. */
  keys: string[];
  durationS: number;
  everyMs: number;
}): Promise<TouchResult> {
  const result: TouchResult = { inserts: 0, rows: 0, failed: 0 };
  const end = performance.now() + opts.durationS * 1000;
  for (let round = 0; performance.now() < end; round++) {
    const started = performance.now();
    const body = touchBatch(round);
    await Promise.all(
      opts.keys.map(async (key) => {
        try {
          const res = await fetch(`${opts.edgeUrl}/api/reports`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body,
          });
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(String(res.status));
          result.inserts++;
          result.rows += 16;
        } catch {
          result.failed++;
        }
      }),
    );
    await sleep(opts.everyMs - (performance.now() - started));
  }
  return result;
}
