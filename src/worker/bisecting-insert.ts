// Inserting a batch so that one bad row cannot block the rest: a batch ClickHouse refuses for its
// data is split in halves until the bad rows are isolated; the others land.

export type InsertRows<T> = (items: T[], token: string) => Promise<void>;

/**
 * Inserts `items`; returns the ones refused for their data, each with the reason. `insert` must
 * throw `DataError` for a refusal of the data and anything else for a failure to give up on.
 */
export async function insertIsolating<T>(
  items: T[],
  token: string,
  insert: InsertRows<T>,
  onRefused: (err: unknown) => void,
): Promise<[T, unknown][]> {
  try {
    await insert(items, token);
    return [];
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    onRefused(err.cause);
    if (items.length === 1) return [[items[0] as T, err.cause]];
    const half = Math.ceil(items.length / 2);
    // Tokens derive from the parent's, so a retried split deduplicates like the whole batch.
    return [
      ...(await insertIsolating(items.slice(0, half), `${token}.0`, insert, onRefused)),
      ...(await insertIsolating(items.slice(half), `${token}.1`, insert, onRefused)),
    ];
  }
}

/** ClickHouse refused the rows themselves: retrying them as they are cannot help. */
export class DataError extends Error {
  override name = "DataError";
}
