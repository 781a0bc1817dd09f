import type { ImportCounts } from "./import-progress.js";
import type { Item } from "./import-reader.js";
import { type Report, toReport } from "./import-source.js";

// Sends reports through POST /api/reports, in batches, a few at a time, until each has a final
// answer. What may succeed later is sent again with the same id (the edge stores an id once): an
// item answered `unavailable` or `rate_limited`, a whole batch answered 429 rate_limited or 503, a
// network error. A batch over the body limit is split in two. A report refused for what it is
// (invalid_report) or by the monthly quota is final. Items are read as batches are sent, a
// batch at a time per lane, and refusals are kept per code: memory does not grow with the file.

export interface SendOptions {
  /** The file's items, counted beforehand (the progress's 100%). */
  total: number;
  url: string;
  key: string;
  batchSize: number;
  concurrency: number;
  /** Attempts per report for answers that may succeed later (pacing by 429s aside). */
  maxAttempts?: number;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
  onProgress?: (counts: ImportCounts) => void;
}

/** The refusals of one code: how many, and the first (its item's 0-based index and message). */
export interface Refusal {
  error: string;
  count: number;
  index: number;
  message: string;
}

type ItemAnswer = { id?: string; duplicate?: boolean; error?: string; message?: string };

const RETRYABLE = new Set(["unavailable", "rate_limited"]);
const FATAL_STATUS = new Set([401, 403, 404, 405, 415]);

export class ImportAbort extends Error {}

interface Pending {
  index: number;
  report: unknown;
  attempts: number;
}

export interface ImportResult {
  counts: ImportCounts;
  refusals: Refusal[];
}

export async function sendReports(
  items: AsyncIterable<Item> | Iterable<Item>,
  opts: SendOptions,
): Promise<ImportResult> {
  const doFetch = opts.fetch ?? fetch;
  const sleep = opts.sleep ?? ((ms: number) => new Promise((r) => setTimeout(r, ms)));
  const maxAttempts = opts.maxAttempts ?? 20;
  const counts: ImportCounts = { total: opts.total, accepted: 0, duplicates: 0, refused: 0 };
  const byCode = new Map<string, Refusal>();
  const refuseIndex = (index: number, error: string, message: string) => {
    counts.refused += 1;
    const r = byCode.get(error);
    if (r) r.count += 1;
    else byCode.set(error, { error, count: 1, index, message });
  };
  const refuse = (p: Pending, error: string, message: string) =>
    refuseIndex(p.index, error, message);

  // Halves of a batch over the body limit go first; then the file's next items, read by one
  // lane at a time so that a batch holds consecutive items.
  const front: Pending[][] = [];
  const source = Symbol.asyncIterator in items ? items[Symbol.asyncIterator]() : toAsync(items);
  let read = 0;
  let reading: Promise<Pending[]> = Promise.resolve([]);
  const readBatch = async (): Promise<Pending[]> => {
    const batch: Pending[] = [];
    while (batch.length < opts.batchSize) {
      const next = await source.next();
      if (next.done) break;
      const index = read++;
      const it = next.value;
      if ("bad" in it) refuseIndex(index, "invalid_json", `not JSON (${it.reason}): ${it.bad}`);
      else batch.push({ index, report: toReport(it.value, index) ?? it.value, attempts: 0 });
    }
    return batch;
  };
  const nextBatch = (): Promise<Pending[]> => {
    const split = front.shift();
    if (split) return Promise.resolve(split);
    reading = reading.then(readBatch);
    return reading;
  };

  const endpoint = `${opts.url.replace(/\/+$/, "")}/api/reports`;
  /** Items to send again, or refused once they have had their attempts. */
  const retry = (items: Pending[], error: string, message: string): Pending[] => {
    const again: Pending[] = [];
    for (const p of items) {
      p.attempts += 1;
      if (p.attempts >= maxAttempts) refuse(p, error, message);
      else again.push(p);
    }
    return again;
  };

  async function sendBatch(batch: Pending[]): Promise<{ again: Pending[]; waitMs: number }> {
    let res: Response;
    try {
      res = await doFetch(endpoint, {
        method: "POST",
        headers: { authorization: `Bearer ${opts.key}`, "content-type": "application/json" },
        body: JSON.stringify(batch.map((p) => p.report)),
      });
    } catch (err) {
      return { again: retry(batch, "network", (err as Error).message), waitMs: 1_000 };
    }
    const waitMs = Math.max(1, Number(res.headers.get("retry-after") ?? 1)) * 1_000;
    const body = (await res.json().catch(() => ({}))) as {
      results?: ItemAnswer[];
      error?: string;
      message?: string;
    };
    if (res.status === 200 || res.status === 207) {
      const again: Pending[] = [];
      let limited = false;
      (body.results ?? []).forEach((r, j) => {
        const p = batch[j] as Pending;
        if (r.id !== undefined) {
          counts.accepted += 1;
          if (r.duplicate) counts.duplicates += 1;
        } else if (r.error === "rate_limited") {
          limited = true;
          again.push(p);
        } else if (r.error && RETRYABLE.has(r.error)) {
          again.push(...retry([p], r.error, r.message ?? ""));
        } else refuse(p, r.error ?? "unknown", r.message ?? "");
      });
      // Backing off: an id held by a send that died is free again only after its claim lapses.
      const tries = Math.max(0, ...again.map((p) => p.attempts));
      return { again, waitMs: limited ? waitMs : Math.min(5_000, 100 * 2 ** tries) };
    }
    if (res.status === 413 && batch.length > 1) {
      const half = Math.ceil(batch.length / 2);
      front.unshift(batch.slice(0, half), batch.slice(half));
      return { again: [], waitMs: 0 };
    }
    if (res.status === 429 && body.error === "rate_limited") return { again: batch, waitMs };
    if (res.status === 503 || res.status >= 500) {
      return { again: retry(batch, body.error ?? "unavailable", body.message ?? ""), waitMs };
    }
    if (FATAL_STATUS.has(res.status)) {
      throw new ImportAbort(`the edge answered ${res.status}: ${body.message ?? body.error}`);
    }
    // Quota used up, or an envelope refused: final for these reports.
    for (const p of batch) refuse(p, body.error ?? String(res.status), body.message ?? "");
    return { again: [], waitMs: 0 };
  }

  async function lane(): Promise<void> {
    // Empty once the file is read (bad items are refused as they are read, not batched); a
    // lane that splits a batch sends its halves itself.
    for (let batch = await nextBatch(); batch.length > 0; batch = await nextBatch()) {
      let { again, waitMs } = await sendBatch(batch);
      opts.onProgress?.(counts);
      while (again.length > 0) {
        await sleep(waitMs);
        ({ again, waitMs } = await sendBatch(again));
        opts.onProgress?.(counts);
      }
    }
  }

  await Promise.all(Array.from({ length: opts.concurrency }, () => lane()));
  return { counts, refusals: [...byCode.values()] };
}

async function* toAsync<T>(items: Iterable<T>): AsyncGenerator<T> {
  yield* items;
}

export type { Report };
