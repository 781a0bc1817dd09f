import { z } from "zod";
import { invalidQuery, LATEST, single } from "./params.js";
import type { ReadStore } from "./read-store.js";
import { chTime, MAX_RANGE_MS, resolveRange } from "./time-range.js";

// Cursors of the newest-first lists: the last row's (time, id), as base64url JSON. Opaque to
// clients; checked in full here, so a forged or damaged cursor is a 400, never a query.

export interface Cursor {
  t: number;
  id: string;
}

export const cursorParam = single(z.string().regex(/^[A-Za-z0-9_-]{1,200}$/, "not a cursor"));

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.t, c.id])).toString("base64url");
}

/** The cursor in `text`, whose id must match `id` (the list's id format). */
export function decodeCursor(text: string, id: RegExp): Cursor {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    value = null;
  }
  if (
    Array.isArray(value) &&
    value.length === 2 &&
    Number.isSafeInteger(value[0]) &&
    value[0] >= 0 &&
    value[0] < LATEST &&
    typeof value[1] === "string" &&
    id.test(value[1])
  ) {
    return { t: value[0], id: value[1] };
  }
  throw invalidQuery("cursor: not a cursor this API gave", [
    { path: "cursor", message: "not a cursor this API gave" },
  ]);
}

/** Page `rows` (one more than `limit` asked for) and the cursor of the next page. */
export function page<T>(rows: T[], limit: number, cursorOf: (row: T) => Cursor) {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return {
    items,
    next_cursor: rows.length > limit && last ? encodeCursor(cursorOf(last)) : null,
  };
}

export interface NewestFirstQuery {
  from?: number;
  to?: number;
  /** The span ending now (ms), instead of from/to. */
  last?: number;
  limit: number;
  cursor?: string;
}

/**
 * One page of a newest-first list over `from`..`to` (at most 400 days): the cursor checked
 * against the list's id format, and one row more than the page asked for. `sql(after)` reads
 * `{project}`, `{from}`, `{to}`, `{limit}` and, after a cursor, `{ct}` and `{cid}`; each row's
 * `t` and `id` make the next cursor.
 */
export async function newestFirstPage<R extends { t: string | number; id: string }>(opts: {
  store: ReadStore;
  now: number;
  q: NewestFirstQuery;
  /** What is listed, for the message of a range too long: "reports". */
  what: string;
  id: RegExp;
  project: string;
  sql: (after: boolean) => string;
  params: Record<string, unknown>;
  /** Past the rows' cache: the caller shares the whole answer (ends-now.ts). */
  uncached?: boolean;
}): Promise<{ items: R[]; next_cursor: string | null }> {
  const { q } = opts;
  const range = resolveRange(q, Math.ceil(opts.now / 1000) * 1000);
  if (range.to - range.from > MAX_RANGE_MS.day) {
    throw invalidQuery(`from/to: ${opts.what} are listed over at most 400 days; narrow the range`);
  }
  const cursor = q.cursor === undefined ? null : decodeCursor(q.cursor, opts.id);
  const rows = await opts.store.rows<R>(
    opts.sql(cursor !== null),
    {
      project: opts.project,
      from: chTime(range.from),
      to: chTime(range.to),
      limit: q.limit + 1,
      ...(cursor ? { ct: chTime(cursor.t), cid: cursor.id } : {}),
      ...opts.params,
    },
    opts.uncached,
  );
  return page(rows, q.limit, (r) => ({ t: Number(r.t), id: r.id }));
}
