import { readFileSync } from "node:fs";
import { cliConfig } from "./context.js";
import { CommandFailed } from "./errors.js";
import { createProgress } from "./import-progress.js";
import { type Refusal, sendReports } from "./import-sender.js";
import { readValues, reportMaker } from "./import-source.js";

// `headroom import FILE|-`: reports from a file (or stdin) through the edge's batch endpoint.

export interface ImportOptions {
  key: string;
  url?: string;
  batch: number;
  concurrency: number;
}

export async function importCommand(file: string, opts: ImportOptions): Promise<void> {
  const text = readFileSync(file === "-" ? 0 : file, "utf8");
  const { values, badLines } = readValues(text);
  const toReport = reportMaker();
  const reports = values.map((v) => toReport(v) ?? v);
  const url = opts.url ?? `http://127.0.0.1:${cliConfig().PORT}`;
  const progress = createProgress({
    write: (s) => process.stderr.write(s),
    tty: process.stderr.isTTY === true,
  });
  const { counts, refusals } = await sendReports(reports, {
    url,
    key: opts.key,
    batchSize: opts.batch,
    concurrency: opts.concurrency,
    onProgress: (c) => progress.update(c),
  });
  progress.finish(counts);
  const refused = counts.refused + badLines.length;
  process.stdout.write(
    `imported ${counts.total + badLines.length} reports: accepted ${counts.accepted} ` +
      `(${counts.duplicates} already stored), refused ${refused}\n`,
  );
  if (badLines.length > 0) process.stdout.write(`  ${badLines.length} lines are not JSON\n`);
  for (const line of summarise(refusals)) process.stdout.write(`  ${line}\n`);
  // The summary is printed: a refusal fails the command without another word.
  if (refused > 0) throw new CommandFailed(1);
}

/** Refusals by code, each with the first report's number (1-based) and message. */
function summarise(refusals: Refusal[]): string[] {
  const byCode = new Map<string, Refusal[]>();
  for (const r of refusals) byCode.set(r.error, [...(byCode.get(r.error) ?? []), r]);
  return [...byCode].map(([code, rs]) => {
    const first = rs[0] as Refusal;
    return `${code}: ${rs.length} (first: report ${first.index + 1}: ${first.message})`;
  });
}
