import { v7 as uuidv7 } from "uuid";
import { validateReport } from "../src/edge/parse-report.js";
import { type ReportRow, toRow } from "../src/report/report-schema.js";

// Report rows for the views' cost (phase-views.ts), made by the edge's own validation from bodies
// as real clients send them: several projects and apps, OpenAI and Anthropic answers with their
// rate-limit and account headers (windows derived from them, pools by account), OpenRouter with
// credits, Groq by pool label, usage on most, and provider hints (no figure at all).

const APPS = ["chat", "search", "batch-jobs", "support-bot"];
const MINUTE_MS = 60_000;

function openai(i: number, at: number): Record<string, unknown> {
  return {
    provider: "openai",
    model: ["gpt-4o", "gpt-4o-mini", "o3-mini"][i % 3],
    limits: {},
    headers: {
      "openai-organization": `org-${i % 3}`,
      "x-ratelimit-limit-requests": "10000",
      "x-ratelimit-remaining-requests": String(10_000 - (i % 10_000)),
      "x-ratelimit-reset-requests": "6ms",
      "x-ratelimit-limit-tokens": "2000000",
      "x-ratelimit-remaining-tokens": String(2_000_000 - ((i * 137) % 2_000_000)),
      "x-ratelimit-reset-tokens": "12.5s",
      "content-type": "application/json",
    },
    usage: { input_tokens: 400 + (i % 900), output_tokens: 120 + (i % 300), cached_tokens: 0 },
    timestamp: new Date(at).toISOString(),
  };
}

function anthropic(i: number, at: number): Record<string, unknown> {
  const reset = new Date(Math.ceil(at / MINUTE_MS) * MINUTE_MS).toISOString().slice(0, 19);
  return {
    provider: "anthropic",
    model: ["claude-sonnet-4", "claude-haiku-4"][i % 2],
    limits: {},
    headers: {
      "anthropic-organization-id": `ant-org-${i % 2}`,
      "anthropic-ratelimit-requests-limit": "1000",
      "anthropic-ratelimit-requests-remaining": String(1_000 - (i % 1_000)),
      "anthropic-ratelimit-requests-reset": `${reset}Z`,
      "anthropic-ratelimit-input-tokens-limit": "80000",
      "anthropic-ratelimit-input-tokens-remaining": String(80_000 - ((i * 31) % 80_000)),
      "anthropic-ratelimit-input-tokens-reset": `${reset}Z`,
      "anthropic-ratelimit-output-tokens-limit": "16000",
      "anthropic-ratelimit-output-tokens-remaining": String(16_000 - ((i * 7) % 16_000)),
      "anthropic-ratelimit-output-tokens-reset": `${reset}Z`,
    },
    usage: { input_tokens: 800 + (i % 1_500), output_tokens: 200 + (i % 500), cached_tokens: 64 },
    timestamp: new Date(at).toISOString(),
  };
}

function openrouter(i: number, at: number): Record<string, unknown> {
  return {
    provider: "openrouter",
    model: ["meta-llama/llama-3.3-70b", "deepseek/deepseek-r1"][i % 2],
    limits: { requests_limit: 200, requests_remaining: 200 - (i % 200) },
    credits: { credits_limit: 100, credits_remaining: 100 - i * 0.001, request_cost: 0.00042 },
    timestamp: new Date(at).toISOString(),
  };
}

function groq(i: number, at: number): Record<string, unknown> {
  return {
    provider: "groq",
    model: "llama-3.1-8b-instant",
    pool: `groq-${i % 2 ? "prod" : "batch"}`,
    limits: {
      requests_limit: 14_400,
      requests_remaining: 14_400 - (i % 14_400),
      tokens_limit: 6_000,
      tokens_remaining: 6_000 - (i % 6_000),
      reset_requests_ms: 6_000,
      reset_tokens_ms: 2_000,
    },
    usage: { input_tokens: 50 + (i % 400), output_tokens: 20 + (i % 100), cached_tokens: null },
    timestamp: new Date(at).toISOString(),
  };
}

/** A provider hint: the client saw the call but no figure of any kind. */
const hint = (i: number, at: number): Record<string, unknown> => ({
  provider: ["openai", "anthropic"][i % 2],
  model: null,
  limits: {},
  timestamp: new Date(at).toISOString(),
});

const KINDS = [openai, openai, anthropic, anthropic, openrouter, groq, hint];

/** Report body `i`: its kind, app and time (spread over the last `spreadMs`) fixed by `i`. */
export function viewsReportBody(i: number, now: number, spreadMs: number): Record<string, unknown> {
  const kind = KINDS[i % KINDS.length] as (typeof KINDS)[number];
  const at = now - ((i * 7_919) % spreadMs);
  return { ...kind(i, at), app: APPS[(i >> 3) % APPS.length] };
}

/**
 * `count` rows as the edge stores them: `projects` projects (one key each), timestamps spread over
 * the last `spreadMs` (a batch drained late spans several minutes).
 */
export function viewsReportRows(
  count: number,
  opts: { projects: number; spreadMs?: number; now?: number },
): ReportRow[] {
  const now = opts.now ?? Date.now();
  const spreadMs = opts.spreadMs ?? 10 * MINUTE_MS;
  return Array.from({ length: count }, (_, i) => {
    const project = i % opts.projects;
    const { record } = validateReport(
      viewsReportBody(i, now, spreadMs),
      {
        reportId: uuidv7({ msecs: now }),
        projectId: `bench-views-${project}`,
        keyId: `key-views-${project}`,
        receivedAt: now,
      },
      { retentionDays: 30, poolSecret: "bench-views-pool-secret" },
    );
    return toRow(record);
  });
}
