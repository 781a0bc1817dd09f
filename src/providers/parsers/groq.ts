import type { ProviderParser } from "../parser.js";
import { readXRateLimit } from "../x-ratelimit.js";
import { readHeaders } from "./run.js";

// Groq: https://console.groq.com/docs/rate-limits (Rate Limit Headers)
// OpenAI's names with other windows: x-ratelimit-*-requests are requests per DAY (RPD), and
// x-ratelimit-*-tokens are tokens per MINUTE (TPM). Resets are Go durations ("2m59.56s",
// "7.66s"); retry-after (seconds) only on a 429.

export const groqParser: ProviderParser = {
  name: "groq",
  version: 1,
  parse: (source) =>
    readHeaders(source, (r) =>
      readXRateLimit(r, (what) => {
        if (what === "requests") return { dimension: "requests", window: "1d" };
        if (what === "tokens") return { dimension: "tokens", window: "1m" };
        return null;
      }),
    ),
};
