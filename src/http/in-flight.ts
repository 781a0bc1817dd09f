import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";

// Requests the app is still answering, per connection. Node reads pipelined requests ahead of
// their answers; when it then finds the connection's framing broken, the requests it had read
// whole are already taken (their reports may be stored), so they still get their answers before
// the connection is refused and closed. See clientErrorHandler (server-options.ts).

const IN_FLIGHT = Symbol("headroom.inFlight");
const ON_ANSWERED = Symbol("headroom.onAnswered");

type Tracked = Duplex & { [IN_FLIGHT]?: Set<IncomingMessage>; [ON_ANSWERED]?: () => void };

export function requestStarted(req: IncomingMessage): void {
  const s = req.socket as Tracked;
  let requests = s[IN_FLIGHT];
  if (!requests) {
    requests = new Set();
    s[IN_FLIGHT] = requests;
  }
  requests.add(req);
}

export function requestAnswered(req: IncomingMessage): void {
  const s = req.socket as Tracked;
  s[IN_FLIGHT]?.delete(req);
  const then = s[ON_ANSWERED];
  if (then && !awaitsAnswer(s)) {
    s[ON_ANSWERED] = undefined;
    then();
  }
}

/** A request read whole and not answered yet (one read in part will never be finished now). */
function awaitsAnswer(s: Tracked): boolean {
  for (const req of s[IN_FLIGHT] ?? []) if (req.complete) return true;
  return false;
}

/** Runs `fn` once every request read whole on `socket` has its answer: now, if none waits. */
export function whenAnswered(socket: Duplex, fn: () => void): void {
  const s = socket as Tracked;
  if (awaitsAnswer(s)) s[ON_ANSWERED] = fn;
  else fn();
}
