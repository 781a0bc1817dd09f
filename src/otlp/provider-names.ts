// Which provider a span names: by the host an HTTP client called, or by the GenAI semantic
// conventions' provider name. Each answer is a provider name the parsers know
// (src/providers/parsers/registry.ts), so that the report's headers get their provider's parser.

/** Hosts of the providers' public APIs. */
const HOSTS = new Map<string, string>([
  ["api.openai.com", "openai"],
  ["api.anthropic.com", "anthropic"],
  ["api.groq.com", "groq"],
  ["generativelanguage.googleapis.com", "gemini"],
  ["api.mistral.ai", "mistral"],
  ["api.cerebras.ai", "cerebras"],
  ["api.together.xyz", "together"],
  ["api.together.ai", "together"],
  ["api.fireworks.ai", "fireworks"],
  ["openrouter.ai", "openrouter"],
]);

/** Hosts named per customer: an Azure OpenAI resource, a Vertex AI region. */
const SUFFIXES: [string, string][] = [
  [".openai.azure.com", "azure-openai"],
  ["aiplatform.googleapis.com", "gemini"],
];

/** The provider whose API `host` is, or null. */
export function providerOfHost(host: string): string | null {
  const h = host.toLowerCase().replace(/\.$/, "");
  const known = HOSTS.get(h);
  if (known) return known;
  for (const [suffix, provider] of SUFFIXES) if (h.endsWith(suffix)) return provider;
  return null;
}

/**
 * `gen_ai.provider.name` (or the older `gen_ai.system`) → the parsers' name for it. The semantic
 * conventions' well-known values that differ from a parser's name are mapped; any other value is
 * the report's provider as sent (it gets the generic parser).
 */
const GEN_AI_NAMES = new Map<string, string>([
  ["azure.ai.openai", "azure-openai"],
  ["az.ai.openai", "azure-openai"],
  ["gcp.gemini", "gemini"],
  ["gcp.vertex_ai", "gemini"],
  ["gcp.gen_ai", "gemini"],
  ["vertex_ai", "gemini"],
  ["mistral_ai", "mistral"],
]);

export function providerOfGenAi(name: string): string {
  const lower = name.trim().toLowerCase();
  return GEN_AI_NAMES.get(lower) ?? lower;
}
