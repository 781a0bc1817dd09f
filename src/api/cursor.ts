import { z } from "zod";
import { invalidQuery, single } from "./params.js";

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
