import type { ProviderParser } from "../parser.js";
import { readBareXRateLimit, readXRateLimit } from "../x-ratelimit.js";
import { readHeaders } from "./run.js";

// Together: https://docs.together.ai/docs/rate-limits (Rate limits in headers)
// x-ratelimit-{limit,remaining,reset} for requests (reset in seconds) and
// x-tokenlimit-{limit,remaining} for tokens. Together's limits are dynamic and its window is not
// stated in the headers, so the window is unknown.

export const togetherParser: ProviderParser = {
  name: "together",
  version: 1,
  parse: (source) =>
    readHeaders(source, (r) => {
      readBareXRateLimit(r, "requests");
      r.add(
        "tokens",
        null,
        {
          limit: r.count("x-tokenlimit-limit"),
          remaining: r.count("x-tokenlimit-remaining"),
          resets_at: r.reset("x-tokenlimit-reset"),
        },
        { remaining: "x-tokenlimit-remaining" },
      );
      readXRateLimit(r);
    }),
};
