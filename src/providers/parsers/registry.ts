import type { ProviderParser } from "../parser.js";
import { anthropicParser } from "./anthropic.js";
import { azureOpenaiParser } from "./azure-openai.js";
import { cerebrasParser } from "./cerebras.js";
import { fireworksParser } from "./fireworks.js";
import { geminiLearned, geminiParser } from "./gemini.js";
import { genericParser } from "./generic.js";
import { groqParser } from "./groq.js";
import { mistralParser } from "./mistral.js";
import { openaiParser } from "./openai.js";
import { openrouterParser } from "./openrouter.js";
import { togetherParser } from "./together.js";

// The parser for a report's `provider` (the edge stores it trimmed and lowercased), by name or a
// common alias; anything else gets the generic parser.

export const PARSERS: readonly ProviderParser[] = [
  openaiParser,
  azureOpenaiParser,
  anthropicParser,
  groqParser,
  mistralParser,
  cerebrasParser,
  togetherParser,
  fireworksParser,
  openrouterParser,
  geminiParser,
  genericParser,
];

const ALIASES: Record<string, ProviderParser> = {
  azure: azureOpenaiParser,
  azure_openai: azureOpenaiParser,
  azureopenai: azureOpenaiParser,
  claude: anthropicParser,
  mistralai: mistralParser,
  "mistral-ai": mistralParser,
  togetherai: togetherParser,
  "together-ai": togetherParser,
  "fireworks-ai": fireworksParser,
  fireworksai: fireworksParser,
  google: geminiParser,
  "google-ai": geminiParser,
  "google-gemini": geminiParser,
  vertex: geminiParser,
  "vertex-ai": geminiParser,
  vertexai: geminiParser,
};

const BY_NAME = new Map<string, ProviderParser>([
  ...PARSERS.map((p) => [p.name, p] as const),
  ...Object.entries(ALIASES),
]);

export function parserFor(provider: string): ProviderParser {
  return BY_NAME.get(provider.trim().toLowerCase()) ?? genericParser;
}

/** "name@version", as DerivedWindows.parser names it. */
export const parserId = (parser: ProviderParser) => `${parser.name}@${parser.version}`;

/**
 * Where a stored window's figures come from, by the parser that derived it (`reports` keeps the
 * parser, not each window's source): Gemini's limits are learned from a 429's quota; every other
 * parser reads what the provider stated.
 */
export function storedWindowSource(
  parser: string,
  w: { limit: number | null },
): "stated" | "learned" {
  return parser.startsWith(`${geminiParser.name}@`) && geminiLearned(w) ? "learned" : "stated";
}
