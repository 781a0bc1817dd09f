import type { ProviderParser } from "../parser.js";
import type { HeaderReader } from "../read-headers.js";
import { dimensionName } from "../read-headers.js";
import { WINDOW_LENGTHS, type WindowLength } from "../window.js";
import { readHeaders } from "./run.js";

// Anthropic: https://docs.anthropic.com/en/api/rate-limits#response-headers
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}, each
// its own per-minute limit (RPM, ITPM, OTPM; tokens is the most restrictive of the token limits
// now in force), resets as RFC 3339 times; anthropic-priority-{input,output}-tokens-* for Priority
// Tier; retry-after (seconds) on a 429.
// Subscriptions (Claude plans) send instead anthropic-ratelimit-unified-<length>[_<pool>]-
// {utilization,reset}: the used fraction of a 5-hour or 7-day allowance and its reset in epoch
// seconds. These are not in the API docs; they are read as a window of dimension "unified" (or
// "unified_<pool>") with limit 100 and remaining = the percent left.

const STANDARD = ["requests", "tokens", "input-tokens", "output-tokens"] as const;
const UNIFIED = /^anthropic-ratelimit-unified-(\d+[a-z]+)(?:_([a-z0-9_]+))?-(utilization|reset)$/;

const lengthOf = (text: string): WindowLength | null =>
  (WINDOW_LENGTHS as readonly string[]).includes(text) ? (text as WindowLength) : null;

function readUnified(r: HeaderReader): void {
  const groups: string[] = [];
  for (const name of r.names(UNIFIED)) {
    const [, length = "", pool = ""] = UNIFIED.exec(name) ?? [];
    const key = pool === "" ? length : `${length}_${pool}`;
    if (!groups.includes(key)) groups.push(key);
  }
  for (const key of groups) {
    const [length = "", ...pool] = key.split("_");
    const utilName = `anthropic-ratelimit-unified-${key}-utilization`;
    let remaining: number | null = null;
    const used = r.count(utilName);
    if (used !== null) {
      if (used > 1) r.warn(utilName, `utilization ${used} above 1, read as fully used`);
      remaining = Math.round((1 - Math.min(used, 1)) * 100 * 1e6) / 1e6;
    }
    r.add(
      pool.length === 0 ? "unified" : dimensionName(`unified_${pool.join("_")}`),
      lengthOf(length),
      {
        limit: used === null ? null : 100,
        remaining,
        resets_at: r.reset(`anthropic-ratelimit-unified-${key}-reset`),
      },
      { remaining: utilName },
    );
  }
}

export const anthropicParser: ProviderParser = {
  name: "anthropic",
  version: 1,
  parse: (source) =>
    readHeaders(source, (r) => {
      for (const prefix of ["anthropic-ratelimit", "anthropic-priority"]) {
        for (const what of STANDARD) {
          const base = `${prefix}-${what}`;
          const dimension = dimensionName(
            prefix === "anthropic-priority" ? `priority_${what}` : what,
          );
          r.add(
            dimension,
            "1m",
            {
              limit: r.count(`${base}-limit`),
              remaining: r.count(`${base}-remaining`),
              resets_at: r.reset(`${base}-reset`),
            },
            { remaining: `${base}-remaining` },
          );
        }
      }
      readUnified(r);
    }),
};
