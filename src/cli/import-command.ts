import { createReadStream, createWriteStream, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { cliConfig } from "./context.js";
import { CommandFailed } from "./errors.js";
import { createProgress } from "./import-progress.js";
import { ImportFileError, readItems } from "./import-reader.js";
import { type Refusal, sendReports } from "./import-sender.js";

// `headroom import FILE|-`: reports from a file (or stdin) through the edge's batch endpoint.

export interface ImportOptions {
  key: string;
  url?: string;
  batch: number;
  concurrency: number;
}

export async function importCommand(file: string, opts: ImportOptions): Promise<void> {
  const { path, done } = file === "-" ? await spoolStdin() : { path: file, done: () => {} };
  try {
    // Counted first (read, not parsed), so that progress has its 100%, and a file broken as a
    // whole (it ends inside its array) fails before anything is sent.
    let total = 0;
    try {
      for await (const _ of readItems(textOf(path), { parse: false })) total += 1;
    } catch (err) {
      const name = file === "-" ? "standard input" : file;
      if (err instanceof ImportFileError) throw new ImportFileError(`${name}: ${err.message}`);
      throw err;
    }
    const url = opts.url ?? `http://127.0.0.1:${cliConfig().PORT}`;
    const progress = createProgress({
      write: (s) => process.stderr.write(s),
      tty: process.stderr.isTTY === true,
    });
    const { counts, refusals } = await sendReports(readItems(textOf(path)), {
      total,
      url,
      key: opts.key,
      batchSize: opts.batch,
      concurrency: opts.concurrency,
      onProgress: (c) => progress.update(c),
    });
    progress.finish(counts);
    process.stdout.write(
      `imported ${counts.total} reports: accepted ${counts.accepted} ` +
        `(${counts.duplicates} already stored), refused ${counts.refused}\n`,
    );
    for (const line of summarise(refusals)) process.stdout.write(`  ${line}\n`);
    // The summary is printed: a refusal fails the command without another word.
    if (counts.refused > 0) throw new CommandFailed(1);
  } finally {
    done();
  }
}

/** The file's text, a MiB at a time. */
const textOf = (path: string): AsyncIterable<string> =>
  createReadStream(path, { encoding: "utf8", highWaterMark: 1 << 20 });

/** Standard input in a temporary file: read twice (counted, then sent) like a named file. */
async function spoolStdin(): Promise<{ path: string; done: () => void }> {
  const dir = mkdtempSync(join(tmpdir(), "headroom-import-"));
  const path = join(dir, "stdin");
  const done = () => rmSync(dir, { recursive: true, force: true });
  try {
    await pipeline(process.stdin, createWriteStream(path));
  } catch (err) {
    done();
    throw err;
  }
  return { path, done };
}

/** Refusals by code, each with the first report's number (1-based) and message. */
const summarise = (refusals: Refusal[]): string[] =>
  refusals.map((r) => `${r.error}: ${r.count} (first: report ${r.index + 1}: ${r.message})`);
