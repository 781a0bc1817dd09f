// Metric families written as OpenMetrics 1.0.0 or as the Prometheus text format 0.0.4, chosen
// from the request's Accept header. Pure: the exporter builds families, this writes them.

export type ExpositionFormat = "openmetrics" | "text";

export const CONTENT_TYPES: Record<ExpositionFormat, string> = {
  openmetrics: "application/openmetrics-text; version=1.0.0; charset=utf-8",
  text: "text/plain; version=0.0.4; charset=utf-8",
};

export interface Sample {
  labels: Record<string, string>;
  value: number;
  /** Counters only: when the counter started from zero (Unix seconds), OpenMetrics' `_created`. */
  created?: number;
}

export interface Family {
  /** Without `_total` for counters: the writer adds it to the samples (and to 0.0.4's name). */
  name: string;
  type: "gauge" | "counter";
  help: string;
  /** OpenMetrics' UNIT; the name must end with `_<unit>`. */
  unit?: string;
  samples: Sample[];
}

/** The best format the client accepts (by q, OpenMetrics on a tie); 0.0.4 when it names none. */
export function negotiate(accept: string | undefined): ExpositionFormat {
  let best: { format: ExpositionFormat; q: number } = { format: "text", q: 0 };
  for (const part of (accept ?? "").split(",")) {
    const [type = "", ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    const param = (name: string) =>
      params.find((p) => p.startsWith(`${name}=`))?.slice(name.length + 1);
    const q = Number(param("q") ?? 1);
    if (!(q > 0)) continue;
    const version = param("version");
    const format: ExpositionFormat | null =
      type === "application/openmetrics-text" && (version === undefined || version === "1.0.0")
        ? "openmetrics"
        : type === "text/plain" || type === "*/*" || type === "text/*"
          ? "text"
          : null;
    if (format === null) continue;
    if (q > best.q || (q === best.q && format === "openmetrics")) best = { format, q };
  }
  return best.format;
}

export const escapeLabelValue = (v: string) =>
  v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

const escapeHelp = (v: string, format: ExpositionFormat) =>
  format === "openmetrics" ? escapeLabelValue(v) : v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");

const NEEDS_ESCAPE = /[\\"\n]/;

// On every sample of a scrape: plain concatenation, and escaping only where it is needed.
function labelText(labels: Record<string, string>): string {
  let out = "";
  for (const k in labels) {
    const v = labels[k] ?? "";
    out += `${out === "" ? "{" : ","}${k}="${NEEDS_ESCAPE.test(v) ? escapeLabelValue(v) : v}"`;
  }
  return out === "" ? "" : `${out}}`;
}

/**
 * A finite number as both formats read it; a NaN or infinity never gets here (see families).
 * A fraction is written to 15 significant digits, the most a double holds for any decimal: what
 * arithmetic on doubles adds past them is noise (0.78 / 100 is 0.0078000000000000005), and every
 * decimal of up to 15 digits (a timestamp's milliseconds, a reported cost) comes back as it was.
 * An integer is written whole.
 */
const numberText = (n: number) =>
  Object.is(n, -0) ? "0" : String(Number.isInteger(n) ? n : Number(n.toPrecision(15)));

export function writeExposition(families: Family[], format: ExpositionFormat): string {
  let out = "";
  for (const f of families) {
    if (f.samples.length === 0) continue;
    const counter = f.type === "counter";
    const metaName = counter && format === "text" ? `${f.name}_total` : f.name;
    out += `# HELP ${metaName} ${escapeHelp(f.help, format)}\n# TYPE ${metaName} ${f.type}\n`;
    if (f.unit && format === "openmetrics") out += `# UNIT ${f.name} ${f.unit}\n`;
    const sampleName = counter ? `${f.name}_total` : f.name;
    for (const s of f.samples) {
      if (!Number.isFinite(s.value)) continue;
      const labels = labelText(s.labels);
      out += `${sampleName}${labels} ${numberText(s.value)}\n`;
      if (counter && format === "openmetrics" && s.created !== undefined) {
        out += `${f.name}_created${labels} ${numberText(s.created)}\n`;
      }
    }
  }
  return format === "openmetrics" ? `${out}# EOF\n` : out;
}
