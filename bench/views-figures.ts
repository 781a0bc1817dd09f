// The views' cost as figures (phase-views.ts measures it): ClickHouse's CPU per report inserted
// into `reports` with every materialized view, ÷ the same rows into `reports` alone (issue 48's
// target: ≤ 2×), and what each view adds on its own.

/** One measured stretch of inserts into one database. */
export interface ViewsSample {
  rows: number;
  /** The engine's own CPU (system.events UserTimeMicroseconds + SystemTimeMicroseconds). */
  engineUs: number;
  /** The embedded server process's CPU (/proc), its HTTP layer included. */
  processUs: number;
}

export interface PerReport {
  engineUs: number;
  processUs: number;
}

export interface ViewCost {
  view: string;
  /** What `reports` with this view alone costs over `reports` alone, per report: the median over
   * rounds of the difference within each round. */
  engineUs: number;
  processUs: number;
  /** Its share of what every view together adds (engine CPU). */
  share: number;
}

export interface ViewsFigures {
  all: PerReport;
  reportsAlone: PerReport;
  /** all ÷ reports alone. */
  ratio: PerReport;
  /** Each view's increment, the costliest first. */
  views: ViewCost[];
  /** Merges after the inserts, per report inserted (null when not measured). */
  merges: { all: PerReport; reportsAlone: PerReport } | null;
}

export const ISSUE_48_TARGET = 2;

const median = (values: number[]): number => {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length === 0
    ? 0
    : s.length % 2
      ? (s[mid] as number)
      : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

/** The median over samples of CPU per report: one slow stretch (another process) moves it least. */
export function perReport(samples: ViewsSample[]): PerReport {
  const ok = samples.filter((s) => s.rows > 0);
  return {
    engineUs: median(ok.map((s) => s.engineUs / s.rows)),
    processUs: median(ok.map((s) => s.processUs / s.rows)),
  };
}

const ratioOf = (a: number, b: number) => (b > 0 ? a / b : 0);

export function viewsFigures(m: {
  all: ViewsSample[];
  reportsAlone: ViewsSample[];
  alone: Record<string, ViewsSample[]>;
  merges?: { all: ViewsSample; reportsAlone: ViewsSample } | null;
}): ViewsFigures {
  const all = perReport(m.all);
  const base = perReport(m.reportsAlone);
  const added = all.engineUs - base.engineUs;
  const views = Object.entries(m.alone)
    .map(([view, samples]) => {
      // Each round's sample against reports alone's of the same round: minutes apart on a shared
      // machine, a round's two stretches are more alike than two rounds.
      const paired = (k: keyof PerReport) =>
        median(
          samples.flatMap((s, r) => {
            const b = m.reportsAlone[r];
            return s.rows > 0 && b && b.rows > 0 ? [s[k] / s.rows - b[k] / b.rows] : [];
          }),
        );
      const engineUs = paired("engineUs");
      return {
        view,
        engineUs,
        processUs: paired("processUs"),
        share: added > 0 ? engineUs / added : 0,
      };
    })
    .sort((a, b) => b.engineUs - a.engineUs);
  return {
    all,
    reportsAlone: base,
    ratio: {
      engineUs: ratioOf(all.engineUs, base.engineUs),
      processUs: ratioOf(all.processUs, base.processUs),
    },
    views,
    merges: m.merges
      ? { all: perReport([m.merges.all]), reportsAlone: perReport([m.merges.reportsAlone]) }
      : null,
  };
}
