import type { ProviderParser } from "../parser.js";
import { readBareXRateLimit, readXRateLimit } from "../x-ratelimit.js";
import { readHeaders } from "./run.js";

// OpenRouter: https://openrouter.ai/docs/api-reference/limits
// X-RateLimit-Limit / -Remaining / -Reset for requests, the reset as epoch milliseconds; the
// interval (e.g. "10s") is a property of the key, not stated per answer, so the window is
// unknown. Upstream providers' own x-ratelimit-*-<what> pass through and follow the general rule.

export const openrouterParser: ProviderParser = {
  name: "openrouter",
  version: 1,
  parse: (source) =>
    readHeaders(source, (r) => {
      readBareXRateLimit(r, "requests");
      readXRateLimit(r);
    }),
};
