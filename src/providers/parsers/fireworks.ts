import type { ProviderParser } from "../parser.js";
import { readXRateLimit } from "../x-ratelimit.js";
import { readHeaders } from "./run.js";

// Fireworks: https://docs.fireworks.ai/serverless/rate-limits
// Limits are prompt (input) tokens per minute and generated (output) tokens per minute, stated in
// x-ratelimit-limit-tokens-prompt and x-ratelimit-limit-tokens-generated (with their -remaining-
// and -reset- siblings when sent). Other <what>s follow the general rule.

export const fireworksParser: ProviderParser = {
  name: "fireworks",
  version: 1,
  parse: (source) =>
    readHeaders(source, (r) =>
      readXRateLimit(r, (what) => {
        if (what === "tokens-prompt") return { dimension: "input_tokens", window: "1m" };
        if (what === "tokens-generated") return { dimension: "output_tokens", window: "1m" };
        if (what === "tokens-prompt-uncached")
          return { dimension: "uncached_input_tokens", window: "1m" };
        if (what === "requests") return { dimension: "requests", window: "1m" };
        return null;
      }),
    ),
};
