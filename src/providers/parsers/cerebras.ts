import type { ProviderParser } from "../parser.js";
import { readXRateLimit } from "../x-ratelimit.js";
import { readHeaders } from "./run.js";

// Cerebras: https://inference-docs.cerebras.ai/support/rate-limits (Rate Limit Headers)
// x-ratelimit-{limit,remaining,reset}-requests-day and …-tokens-minute, the window in the name;
// resets are plain seconds, fractional ("33011.382867097855"). The general rule reads them, and
// any other period Cerebras adds (hour).

export const cerebrasParser: ProviderParser = {
  name: "cerebras",
  version: 1,
  parse: (source) => readHeaders(source, (r) => readXRateLimit(r)),
};
