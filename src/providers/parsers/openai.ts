import type { ProviderParser } from "../parser.js";
import { type Classify, readXRateLimit } from "../x-ratelimit.js";
import { readHeaders } from "./run.js";

// OpenAI: https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers
// x-ratelimit-{limit,remaining,reset}-{requests,tokens}; resets are Go durations ("1s", "6m0s").
// The limits are per minute (RPM, TPM). Other <what>s (tokens_usage_based) follow the general rule
// with the same minute window.

export const openaiMeaning: Classify = (what) => {
  if (what === "requests") return { dimension: "requests", window: "1m" };
  if (what === "tokens") return { dimension: "tokens", window: "1m" };
  if (what.startsWith("tokens_") || what.startsWith("requests_"))
    return { dimension: what.replace(/[^a-z0-9_]/g, "_"), window: "1m" };
  return null;
};

export const openaiParser: ProviderParser = {
  name: "openai",
  version: 1,
  parse: (source) => readHeaders(source, (r) => readXRateLimit(r, openaiMeaning)),
};
