import { readIetfRateLimit } from "../ietf-ratelimit.js";
import type { ProviderParser } from "../parser.js";
import { readBareXRateLimit, readXRateLimit } from "../x-ratelimit.js";
import { readHeaders } from "./run.js";

// Any other provider: x-ratelimit-{limit,remaining,reset}-<what> with the window read from a
// period word in <what>, the bare x-ratelimit-{limit,remaining,reset} (requests), and the IETF
// RateLimit / RateLimit-Policy fields (https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/).

export const genericParser: ProviderParser = {
  name: "generic",
  version: 1,
  parse: (source) =>
    readHeaders(source, (r) => {
      readXRateLimit(r);
      readBareXRateLimit(r, "requests");
      readIetfRateLimit(r);
    }),
};
