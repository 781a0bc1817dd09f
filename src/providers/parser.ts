import type { Window, WindowSource, WindowWarning } from "./window.js";

// A provider's parser: versioned, so that windows derived by an older version can be found and
// re-derived when a parser is fixed. Bump `version` whenever a change alters any output.

/** What a parser reads: a report's source with its headers as a lowercase-name map. */
export interface ParserInput extends Omit<WindowSource, "headers"> {
  headers: ReadonlyMap<string, string>;
}

export interface ParseResult {
  windows: Window[];
  warnings: WindowWarning[];
}

export interface ProviderParser {
  /** kebab-case, e.g. "azure-openai". */
  name: string;
  version: number;
  /** Never throws: junk values become null with a warning. */
  parse(source: ParserInput): ParseResult;
}
