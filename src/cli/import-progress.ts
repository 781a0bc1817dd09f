// How `headroom import` shows its progress: a bar redrawn in place on a terminal, a plain line
// every few seconds otherwise (a log, a pipe), and a summary at the end.

export interface ImportCounts {
  total: number;
  accepted: number;
  duplicates: number;
  refused: number;
}

export interface ProgressOptions {
  write: (text: string) => void;
  tty: boolean;
  now?: () => number;
  /** Between two plain lines. */
  lineEveryMs?: number;
}

const WIDTH = 24;

function seconds(s: number): string {
  if (!Number.isFinite(s)) return "?";
  if (s < 60) return `${Math.ceil(s)}s`;
  return `${Math.floor(s / 60)}m${String(Math.ceil(s % 60)).padStart(2, "0")}s`;
}

export function createProgress(opts: ProgressOptions) {
  const now = opts.now ?? Date.now;
  const started = now();
  const lineEveryMs = opts.lineEveryMs ?? 2_000;
  let lastLine = Number.NEGATIVE_INFINITY;
  let lastDraw = Number.NEGATIVE_INFINITY;
  /** Reports done in the last plain line: the closing line is not printed twice. */
  let lineDone = -1;

  const figures = (c: ImportCounts) => {
    const done = c.accepted + c.refused;
    const elapsed = Math.max(1, now() - started) / 1000;
    const rate = done / elapsed;
    const eta = rate > 0 ? (c.total - done) / rate : Number.POSITIVE_INFINITY;
    return { done, rate, eta };
  };

  return {
    update(c: ImportCounts, force = false): void {
      const t = now();
      const { done, rate, eta } = figures(c);
      if (opts.tty) {
        // A terminal is redrawn at most ten times a second.
        if (!force && t - lastDraw < 100) return;
        lastDraw = t;
        const filled = c.total > 0 ? Math.round((done / c.total) * WIDTH) : WIDTH;
        const bar = `${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}`;
        const pct = c.total > 0 ? Math.floor((done / c.total) * 100) : 100;
        opts.write(
          `\r[${bar}] ${pct}% ${done}/${c.total}  ${Math.round(rate)} reports/s  accepted ${c.accepted}  refused ${c.refused}  ETA ${seconds(eta)}\x1b[K`,
        );
        return;
      }
      if (force ? done === lineDone : t - lastLine < lineEveryMs) return;
      lastLine = t;
      lineDone = done;
      opts.write(
        `import: ${done}/${c.total} reports, accepted ${c.accepted}, refused ${c.refused}, ${Math.round(rate)} reports/s, ETA ${seconds(eta)}\n`,
      );
    },

    /** Ends the bar's line. */
    finish(c: ImportCounts): void {
      this.update(c, true);
      if (opts.tty) opts.write("\n");
    },
  };
}
