// A circuit breaker per receiver: after `failures` deliveries in a row that got no answer (timed
// out, refused, reset), the receiver is not tried for `coolOffMs`; its deliveries fail at once
// (an attempt, retried with the queue's backoff like any failure) instead of holding a slot for
// the whole timeout. After the cool-off one delivery is let through as a probe: an answer closes
// the breaker, another silence opens it for a new cool-off.

export interface BreakerOptions {
  failures: number;
  coolOffMs: number;
  now?: () => number;
}

interface Breaker {
  /** Unanswered deliveries in a row. */
  silent: number;
  /** Until when no delivery is let through (ms); 0 while closed. */
  openUntil: number;
}

/** Receivers remembered at most; past it the oldest are forgotten (they start closed again). */
const MAX_RECEIVERS = 10_000;

export interface ReceiverBreakers {
  /** Whether a delivery to `receiver` may be tried now; a probe after the cool-off counts. */
  allow(receiver: string): boolean;
  /** The outcome of a delivery that was tried: `answered` is any HTTP answer, even an error. */
  record(receiver: string, answered: boolean): void;
  /** Until when `receiver` is not tried (ms), or null when it may be. */
  openUntil(receiver: string): number | null;
}

export function createReceiverBreakers(opts: BreakerOptions): ReceiverBreakers {
  const now = opts.now ?? Date.now;
  const breakers = new Map<string, Breaker>();

  return {
    allow(receiver: string): boolean {
      const b = breakers.get(receiver);
      if (!b || b.openUntil === 0) return true;
      const t = now();
      if (t < b.openUntil) return false;
      // Half-open: this delivery is the probe; the others wait for its outcome.
      b.openUntil = t + opts.coolOffMs;
      return true;
    },
    record(receiver: string, answered: boolean): void {
      if (answered) {
        breakers.delete(receiver);
        return;
      }
      const b = breakers.get(receiver) ?? { silent: 0, openUntil: 0 };
      b.silent += 1;
      if (b.silent >= opts.failures) b.openUntil = now() + opts.coolOffMs;
      breakers.delete(receiver);
      breakers.set(receiver, b);
      if (breakers.size > MAX_RECEIVERS) {
        const oldest = breakers.keys().next().value;
        if (oldest !== undefined) breakers.delete(oldest);
      }
    },
    openUntil(receiver: string): number | null {
      const b = breakers.get(receiver);
      return b && b.openUntil > now() ? b.openUntil : null;
    },
  };
}
