// Which of the readers' answers count as answers: a 200, or a 304 to a revalidation (the page's
// browser sends If-None-Match). Anything else (a 400, a 5xx, a connection error) failed, and its
// latency is no result: the readers leave it out of the percentiles, and a figure measured over
// an endpoint with any failure is marked invalid with this note.

export const answered = (status: string): boolean => status === "200" || status === "304";

/** "17 of 17 answers were 400", "3 of 120 answers failed (400: 2, error: 1)", or null. */
export function failedNote(statuses: Record<string, number>): string | null {
  let total = 0;
  const failed: Array<[string, number]> = [];
  for (const [status, n] of Object.entries(statuses)) {
    total += n;
    if (!answered(status) && n > 0) failed.push([status, n]);
  }
  const count = failed.reduce((sum, [, n]) => sum + n, 0);
  if (count === 0) return null;
  const only = failed.length === 1 ? failed[0] : undefined;
  if (only) return `${count} of ${total} answers were ${only[0]}`;
  return `${count} of ${total} answers failed (${failed.map(([s, n]) => `${s}: ${n}`).join(", ")})`;
}

/** An endpoint's latencies for the log: "p50 … ms, p99 … ms", said INVALID with why when any failed. */
export function latencyText(e: {
  statuses: Record<string, number>;
  latencyMs: { p50: number; p99: number };
}): string {
  const failed = failedNote(e.statuses);
  const figures = `p50 ${e.latencyMs.p50} ms, p99 ${e.latencyMs.p99} ms`;
  if (failed === null) return figures;
  const ok = Object.entries(e.statuses).some(([s, n]) => answered(s) && n > 0);
  return ok
    ? `${figures} of the answers that succeeded, INVALID (${failed})`
    : `no answer succeeded, INVALID (${failed})`;
}
