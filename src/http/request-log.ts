import type { FastifyRequest } from "fastify";

// What the edge writes about a request: never a key. A key sent by mistake in the query string
// (`?key=hr_…`) or in the path is redacted before a URL reaches a log line or an error body.
// Only called when something is logged or a 404 is answered: never on the accepted path.

const REDACTED = "[redacted]";

// Key-shaped: an issued (`hr_`, `hrr_`) or imported (`dlm_`) prefix and everything after it, as imported
// keys may hold a `/`; or a run of 16 or more key characters (the shortest key an edge accepts;
// no route has a segment that long).
const KEY_SHAPED = /(?:hr[rma]?_|dlm_)[A-Za-z0-9._~+/=%-]*|[A-Za-z0-9._~+=%-]{16,}/g;

/** The path of `url` with every key-shaped part redacted; the query string is dropped. */
export function redactPath(url: string): string {
  const end = url.search(/[?#]/);
  const path = end < 0 ? url : url.slice(0, end);
  return path.replace(KEY_SHAPED, REDACTED);
}

/** `url` fit for a log line: the path redacted, and a query string only marked as present. */
export function redactUrl(url: string): string {
  const path = redactPath(url);
  return /[?#]/.test(url) ? `${path}?${REDACTED}` : path;
}

/** Fastify's own request serializer, with the URL redacted. */
export function serializeRequest(req: FastifyRequest) {
  return {
    method: req.method,
    url: redactUrl(req.url),
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}
