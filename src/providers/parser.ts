import type { Window, WindowSource, WindowWarning } from "./window.js";

// A provider's parser: versioned, so that windows derived by an older version can be found and
// re-derived when a parser is fixed. Bump `version` whenever a change alters any output.

export interface ParseResult {
  windows: Window[];
  warnings: WindowWarning[];
}

export interface ProviderParser {
  /** kebab-case, e.g. "azure-openai". */
  name: string;
  version: number;
  /** Reads header names in any case. Never throws: junk values become null with a warning. */
  parse(source: WindowSource): ParseResult;
}
