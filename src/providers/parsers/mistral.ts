import type { ProviderParser } from "../parser.js";
import { readXRateLimit } from "../x-ratelimit.js";
import { readHeaders } from "./run.js";

// Mistral: the docs (https://docs.mistral.ai/deployment/ai-studio/tier) state the limits per
// workspace and model — requests per second or minute, tokens per minute and per month — and
// the headers carry them, in two generations seen in answers (mistralai/client-ts#169):
// - x-ratelimit-{limit,remaining}-req-minute, x-ratelimit-{limit,remaining}-tokens-minute,
//   x-ratelimit-{limit,remaining}-tokens-month (+ x-ratelimit-tokens-query-cost), read by the
//   general rule: "req-minute" → requests per minute, "tokens-month" → tokens per month;
// - x-ratelimitbysize-{limit,remaining}-{minute,month} (tokens) with
//   ratelimitbysize-{limit,remaining,reset,query-cost}, the minute window and its reset in seconds.

export const mistralParser: ProviderParser = {
  name: "mistral",
  version: 1,
  parse: (source) =>
    readHeaders(source, (r) => {
      readXRateLimit(r);
      // Both generations' minute figures are read (so junk in either is warned about); the
      // x- one wins when both are sent.
      const limits = [r.count("x-ratelimitbysize-limit-minute"), r.count("ratelimitbysize-limit")];
      const remainings = [
        r.count("x-ratelimitbysize-remaining-minute"),
        r.count("ratelimitbysize-remaining"),
      ];
      r.add(
        "tokens",
        "1m",
        {
          limit: limits[0] ?? limits[1] ?? null,
          remaining: remainings[0] ?? remainings[1] ?? null,
          resets_at: r.reset("ratelimitbysize-reset"),
        },
        { remaining: "x-ratelimitbysize-remaining-minute" },
      );
      r.add(
        "tokens",
        "1mo",
        {
          limit: r.count("x-ratelimitbysize-limit-month"),
          remaining: r.count("x-ratelimitbysize-remaining-month"),
          resets_at: null,
        },
        { remaining: "x-ratelimitbysize-remaining-month" },
      );
    }),
};
