import { Resolver as DnsResolver } from "node:dns/promises";
import type { Config } from "../config.js";

// How a webhook's host name is looked up, at rule create, update and test and at every send.
// Not dns.lookup: getaddrinfo runs on libuv's thread pool (4 threads), which the read API's
// compression and file reads also use, so a tenant's host whose DNS never answers would stall
// everyone's answers. c-ares (dns.Resolver) queries on the event loop, each look-up is bounded by
// a deadline, and a process has at most `maxConcurrent` in flight: past it a look-up is refused at
// once, retryable. Names are looked up in DNS only (A and AAAA), not in /etc/hosts; `localhost`
// and `*.localhost` are 127.0.0.1 (RFC 6761) without a query.

export interface ResolvedAddress {
  address: string;
  family: number;
}
export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

export interface WebhookDnsOptions {
  /** DNS servers, `ip` or `ip:port` (`[ip]:port` for IPv6); empty: the system's (resolv.conf). */
  servers: readonly string[];
  /** The longest a look-up takes, both queries and their retries included. */
  timeoutMs: number;
  /** Look-ups in flight in this process; past it one is refused at once (try again). */
  maxConcurrent: number;
}

/** A look-up that did not answer in time, or found the process's look-ups all taken: try again. */
export class WebhookDnsUnavailableError extends Error {
  override name = "WebhookDnsUnavailableError";
}

export const webhookDnsOf = (
  config: Pick<
    Config,
    | "ALERTS_WEBHOOK_DNS_SERVERS"
    | "ALERTS_WEBHOOK_DNS_TIMEOUT_MS"
    | "ALERTS_WEBHOOK_DNS_MAX_CONCURRENT"
  >,
): WebhookDnsOptions => ({
  servers: config.ALERTS_WEBHOOK_DNS_SERVERS,
  timeoutMs: config.ALERTS_WEBHOOK_DNS_TIMEOUT_MS,
  maxConcurrent: config.ALERTS_WEBHOOK_DNS_MAX_CONCURRENT,
});

/** Answers that say the name has no such address (as opposed to no answer at all). */
const NO_ADDRESS = new Set(["ENOTFOUND", "ENODATA", "ENONAME", "EBADNAME", "ENOTIMP"]);

/** What /etc/hosts says of localhost most often; an allowance of 127.0.0.0/8 keeps covering it. */
const LOOPBACK: ResolvedAddress[] = [{ address: "127.0.0.1", family: 4 }];

export function createWebhookResolver(opts: WebhookDnsOptions): Resolver {
  let inFlight = 0;
  return async (host) => {
    const name = host.toLowerCase();
    if (name === "localhost" || name.endsWith(".localhost")) return LOOPBACK;
    if (inFlight >= opts.maxConcurrent) {
      throw new WebhookDnsUnavailableError(
        `too many webhook look-ups in progress (${opts.maxConcurrent}): try again shortly`,
      );
    }
    inFlight++;
    // A resolver of its own, so that the deadline cancels this look-up's queries only.
    const resolver = new DnsResolver({
      timeout: Math.max(1, Math.ceil(opts.timeoutMs / 2)),
      tries: 2,
    });
    if (opts.servers.length > 0) resolver.setServers([...opts.servers]);
    const deadline = setTimeout(() => resolver.cancel(), opts.timeoutMs);
    try {
      const answers = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
      const found: ResolvedAddress[] = [];
      let unanswered = false;
      answers.forEach((a, i) => {
        if (a.status === "fulfilled") {
          for (const address of a.value) found.push({ address, family: i === 0 ? 4 : 6 });
        } else if (!NO_ADDRESS.has((a.reason as NodeJS.ErrnoException).code ?? "")) {
          unanswered = true;
        }
      });
      if (found.length === 0 && unanswered) {
        throw new WebhookDnsUnavailableError(
          `the DNS look-up of ${name} did not answer within ${opts.timeoutMs} ms: try again later`,
        );
      }
      return found;
    } finally {
      clearTimeout(deadline);
      inFlight--;
    }
  };
}
