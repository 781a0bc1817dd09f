// What a report's warning is about, as a metric label: the report field it names, from a closed
// set Headroom defines. A warning's path is the tenant's to choose (a header's name, an error
// body's keys, a provider's dimension), so it is said in the answer and never becomes a label:
// one label value per name a tenant invents would grow every scrape without bound.

export const WARNING_KINDS = [
  "timestamp",
  "app",
  "model",
  "limits",
  "credits",
  "headers",
  "error",
  "parser",
  "windows",
  "other",
] as const;
export type WarningKind = (typeof WARNING_KINDS)[number];

const KNOWN = new Set<string>(WARNING_KINDS);

/** The kind of the warning at `path` (`headers.x-ratelimit-…` → `headers`); `other` when none fits. */
export function warningKind(path: string): WarningKind {
  const end = path.search(/[.[]/);
  const field = end < 0 ? path : path.slice(0, end);
  return KNOWN.has(field) ? (field as WarningKind) : "other";
}
