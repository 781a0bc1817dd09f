import { sampleBody } from "../test/helpers/sample-reports.js";

// Request bodies for the load generator: the realistic sample mix (providers, models, apps,
// provider hints, credits), serialised once, with a fresh timestamp spliced in per request so the
// generator spends its CPU on sending, not on JSON.stringify.

const MARK = "@@timestamp@@";

export interface BodySource {
  /** Body number `i` (cycling through the templates), stamped with the current time. */
  body(i: number): string;
  size: number;
}

export function createBodySource(templates = 4_096, now: () => number = Date.now): BodySource {
  const parts: [string, string][] = [];
  for (let i = 0; i < templates; i++) {
    const json = JSON.stringify({ ...sampleBody(i), timestamp: MARK });
    const at = json.indexOf(MARK);
    parts.push([json.slice(0, at), json.slice(at + MARK.length)]);
  }
  // toISOString costs more than the splice; one per millisecond is enough.
  let stampedAt = -1;
  let stamp = "";
  return {
    size: parts.length,
    body(i) {
      const t = now();
      if (t !== stampedAt) {
        stampedAt = t;
        stamp = new Date(t).toISOString();
      }
      const [head, tail] = parts[i % parts.length] as [string, string];
      return head + stamp + tail;
    },
  };
}
