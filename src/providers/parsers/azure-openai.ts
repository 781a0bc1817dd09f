import type { ProviderParser } from "../parser.js";
import { readXRateLimit } from "../x-ratelimit.js";
import { openaiMeaning } from "./openai.js";
import { readHeaders } from "./run.js";

// Azure OpenAI: https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits
// OpenAI's names, most often only x-ratelimit-remaining-{requests,tokens} (limits and resets on
// some API versions, resets as plain seconds). Quotas are per minute, enforced over 1 s and 10 s
// periods; -1 has been sent for "not stated" (openai/openai-dotnet#838) and reads as null with a
// warning. A 429 carries retry-after (seconds) and retry-after-ms.

export const azureOpenaiParser: ProviderParser = {
  name: "azure-openai",
  version: 1,
  parse: (source) =>
    readHeaders(source, (r) => {
      readXRateLimit(r, openaiMeaning);
      // Bounded as every reset is: a delay past a year is null with a warning.
      const retry = [r.resetAfterMs("retry-after-ms"), r.resetAfterMs("x-ms-retry-after-ms")];
      const retryAt = retry[0] ?? retry[1] ?? null;
      if (retryAt !== null)
        for (const w of r.windows)
          if (w.remaining === 0 && w.resets_at === null) w.resets_at = retryAt;
    }),
};
