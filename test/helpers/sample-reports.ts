import { v7 as uuidv7 } from "uuid";
import {
  type ReportBody,
  type ReportRow,
  reportBodySchema,
  toRecord,
  toRow,
} from "../../src/report/report-schema.js";
import { NULL_LIMITS } from "./report-oracle.js";

// Realistic reports, as the real client library sends them: a mix of providers, models and apps,
// provider hints (model null, every limit null, no credits), and credits on some.

const PROVIDERS = [
  ["openai", ["gpt-4o", "gpt-4o-mini", "o3-mini"]],
  ["anthropic", ["claude-sonnet-4", "claude-haiku-4"]],
  ["openrouter", ["meta-llama/llama-3.3-70b", "deepseek/deepseek-r1"]],
  ["groq", ["llama-3.1-8b-instant"]],
] as const;
const APPS = ["chat", "search", "batch-jobs", "support-bot"];

/**
 * The limits of edge-fixture's clientReport(), as the real client sends them: whole numbers,
 * stored as they are sent.
 */
export const CLIENT_LIMITS = {
  requests_limit: 10_000,
  requests_remaining: 9_999,
  tokens_limit: 2_000_000,
  tokens_remaining: 1_999_000,
  reset_requests_ms: 6_000,
  reset_tokens_ms: 30,
} as const;

export function sampleBody(i: number): Record<string, unknown> {
  const [provider, models] = PROVIDERS[i % PROVIDERS.length] as (typeof PROVIDERS)[number];
  const timestamp = new Date().toISOString();
  if (i % 17 === 0) {
    return {
      app: APPS[i % APPS.length],
      provider,
      model: null,
      timestamp,
      limits: { ...NULL_LIMITS },
    };
  }
  return {
    app: APPS[i % APPS.length],
    provider,
    model: models[i % models.length],
    timestamp,
    limits: {
      requests_limit: 10_000,
      requests_remaining: 10_000 - (i % 10_000),
      tokens_limit: 2_000_000,
      tokens_remaining: 2_000_000 - ((i * 137) % 2_000_000),
      reset_requests_ms: 6_000,
      reset_tokens_ms: 12_500,
    },
    credits:
      provider === "openrouter"
        ? { credits_limit: 100, credits_remaining: 100 - i * 0.001, request_cost: 0.00042 }
        : null,
  };
}

/** A queue-ready row, as the edge would have made it. */
export function sampleRow(i: number, projectId = "p-test", keyId = "key_test"): ReportRow {
  const body = reportBodySchema.parse(sampleBody(i)) as ReportBody;
  const receivedAt = Date.now();
  return toRow(
    toRecord(body, { reportId: uuidv7({ msecs: receivedAt }), projectId, keyId, receivedAt }),
  );
}
