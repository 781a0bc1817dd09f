import { isIPv6 } from "node:net";

// Failed authentications per client, in process: a fixed window per client that opens at its
// first failure. Bounded: at most `maxClients` windows are held; a new client first drops the
// windows that are over, then the oldest one. IPv6 clients count per /64, the block one
// subscriber usually holds, so that rotating addresses inside it does not reset the count.

export interface FailedAuthLimiterOptions {
  points: number;
  windowMs: number;
  maxClients: number;
}

interface Window {
  used: number;
  until: number;
}

/** A client's window as a 429 tells it: failures left, and when the window closes. */
export interface FailureWindow {
  remaining: number;
  msToReset: number;
}

/** The client an address counts as: itself (IPv4), its /64 (IPv6). */
export function clientOf(ip: string): string {
  // Every request asks while any client has failed lately: an address without a colon (IPv4)
  // skips isIPv6's regex, most of this function's cost.
  if (!ip.includes(":") || !isIPv6(ip)) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1] as string;
  const [head = "", tail] = ip.toLowerCase().split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  // An embedded IPv4 tail is two groups; only the first four groups matter here.
  const groups = [
    ...left,
    ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"),
    ...right,
  ];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}

export interface FailedAuthLimiter {
  /** The client's window, or null when it has no failures. */
  get(ip: string): FailureWindow | null;
  /** Counts `n` failures. */
  add(ip: string, n?: number): void;
  /** Takes one failure ahead of time; the refusal when none is left (nothing taken then). */
  take(ip: string): FailureWindow | null;
  /** Gives one back (an attempt that turned out good). */
  give(ip: string): void;
  /** Clients held now (expired windows included until they are swept). */
  readonly size: number;
}

export function createFailedAuthLimiter(opts: FailedAuthLimiterOptions): FailedAuthLimiter {
  const windows = new Map<string, Window>();

  const live = (client: string, now: number): Window | null => {
    const w = windows.get(client);
    if (!w) return null;
    if (w.until > now) return w;
    windows.delete(client);
    return null;
  };

  const open = (client: string, now: number): Window => {
    // Map order is insertion order, and every window lasts as long: the first is the oldest.
    for (const [k, w] of windows) {
      if (windows.size < opts.maxClients && w.until > now) break;
      windows.delete(k);
    }
    const w = { used: 0, until: now + opts.windowMs };
    windows.set(client, w);
    return w;
  };

  const result = (w: Window, now: number): FailureWindow => ({
    remaining: opts.points - w.used,
    msToReset: w.until - now,
  });

  return {
    get(ip: string): FailureWindow | null {
      // Nobody has failed lately: the usual case, and no address to work out.
      if (windows.size === 0) return null;
      const now = Date.now();
      const w = live(clientOf(ip), now);
      return w ? result(w, now) : null;
    },

    add(ip: string, n = 1): void {
      const now = Date.now();
      const client = clientOf(ip);
      const w = live(client, now) ?? open(client, now);
      w.used += n;
    },

    take(ip: string): FailureWindow | null {
      const now = Date.now();
      const client = clientOf(ip);
      const w = live(client, now) ?? open(client, now);
      if (w.used >= opts.points) return result(w, now);
      w.used += 1;
      return null;
    },

    give(ip: string): void {
      const w = live(clientOf(ip), Date.now());
      if (w && w.used > 0) w.used -= 1;
    },

    get size(): number {
      return windows.size;
    },
  };
}
