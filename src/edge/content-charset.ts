import { HttpError } from "../http/errors.js";

// Report bodies are UTF-8 JSON: a Content-Type naming another charset is a 415, for a single
// report and a batch alike. No charset parameter means UTF-8 (RFC 8259).

const CHARSET = /charset\s*=\s*"?([^";\s]+)/i;

/** The 415 for a Content-Type whose charset is not UTF-8; null when it is, or names none. */
export function charsetRefusal(contentType: string | undefined): HttpError | null {
  const charset = CHARSET.exec(contentType ?? "")?.[1];
  return charset && !/^utf-?8$/i.test(charset)
    ? new HttpError("unsupported_media_type", `charset ${charset} is not supported`)
    : null;
}
