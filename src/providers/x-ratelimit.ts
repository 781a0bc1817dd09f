import { dimensionName, type HeaderReader, windowOfWord } from "./read-headers.js";
import type { WindowLength } from "./window.js";

// The `x-ratelimit-{limit,remaining,reset}-<what>` family that OpenAI started and most providers
// copied, each with its own <what>: OpenAI and Groq `requests` / `tokens`, Cerebras
// `requests-day` / `tokens-minute`, Mistral `req-minute` / `tokens-month`, Fireworks
// `tokens-prompt` / `tokens-generated`. A parser says what its <what>s mean; the rest are read
// by the general rule below.

export interface Meaning {
  dimension: string;
  window: WindowLength | null;
}

export type Classify = (what: string) => Meaning | null;

/**
 * The general rule: a trailing period word names the window ("requests-day" → requests per day),
 * what is left is the dimension ("tokens_usage_based"), window unknown when no period is named.
 */
export function generalMeaning(what: string): Meaning {
  const parts = what.split(/[-_]/);
  const last = parts.at(-1) ?? "";
  const window = windowOfWord(last);
  const rest = window === null ? parts : parts.slice(0, -1);
  return { dimension: dimensionName(rest.join("_")), window };
}

const FAMILY = /^x-ratelimit-(limit|remaining|reset)-(.+)$/;

/** Reads every `x-ratelimit-{limit,remaining,reset}-<what>` header into windows. */
export function readXRateLimit(r: HeaderReader, classify: Classify = generalMeaning): void {
  const whats: string[] = [];
  for (const name of r.names(FAMILY)) {
    const what = FAMILY.exec(name)?.[2];
    if (what !== undefined && !whats.includes(what)) whats.push(what);
  }
  for (const what of whats) {
    const meaning = classify(what) ?? generalMeaning(what);
    const limitName = `x-ratelimit-limit-${what}`;
    const remainingName = `x-ratelimit-remaining-${what}`;
    r.add(
      meaning.dimension,
      meaning.window,
      {
        limit: r.count(limitName),
        remaining: r.count(remainingName),
        resets_at: r.reset(`x-ratelimit-reset-${what}`),
      },
      { limit: limitName, remaining: remainingName },
    );
  }
}

/**
 * The bare `x-ratelimit-{limit,remaining,reset}` (Together, OpenRouter, many APIs): one window of
 * `dimension`, length unknown unless the caller knows it.
 */
export function readBareXRateLimit(
  r: HeaderReader,
  dimension = "requests",
  window: WindowLength | null = null,
): void {
  r.add(
    dimension,
    window,
    {
      limit: r.count("x-ratelimit-limit"),
      remaining: r.count("x-ratelimit-remaining"),
      resets_at: r.reset("x-ratelimit-reset"),
    },
    { limit: "x-ratelimit-limit", remaining: "x-ratelimit-remaining" },
  );
}
