// The request bodies an edge holds at once, by their declared size: counted from a request's
// arrival (before its body is read) until its answer is sent or its connection is gone. Past
// EDGE_MAX_BYTES_IN_FLIGHT a request is answered 503 before its body is read, as the backlog bound
// answers: otherwise what an edge holds grows with connections × body size, without a bound.
// The default (32 MiB) is above what 512 connections sending batches of 100 hold (about 23 MB):
// it is a ceiling for any concurrency, not a tuning of RSS, which garbage not yet collected
// dominates (docs/benchmarks.md). The first request is always let in, whatever its size (its
// route's body limit still applies).

export interface BytesInFlight {
  /** Bytes held now. */
  readonly bytes: number;
  /** Holds `size` bytes if the bound allows: false when it would pass it (and nothing is taken). */
  take(size: number): boolean;
  give(size: number): void;
}

export function createBytesInFlight(max: number): BytesInFlight {
  let bytes = 0;
  return {
    get bytes() {
      return bytes;
    },
    take(size) {
      if (bytes > 0 && bytes + size > max) return false;
      bytes += size;
      return true;
    },
    give(size) {
      bytes -= size;
    },
  };
}

/**
 * What a request will hold: its Content-Length, or `unknownLength` for a body sent in chunks
 * (its size is known only once read: it counts as the largest the edge takes).
 */
export function declaredBytes(
  headers: { "content-length"?: string; "transfer-encoding"?: string },
  unknownLength: number,
): number {
  const length = headers["content-length"];
  if (length !== undefined) return Number(length) || 0;
  return headers["transfer-encoding"] !== undefined ? unknownLength : 0;
}
