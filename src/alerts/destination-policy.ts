import { BlockList, isIP, type LookupFunction } from "node:net";
import { createWebhookResolver, type ResolvedAddress, type Resolver } from "./webhook-dns.js";

// Where a tenant's webhook may point. The alerts worker posts from inside the deployment, so an
// address of the deployment's own networks (ClickHouse, Redis, the cloud's metadata service)
// would let a tenant write to, or read from, what it must not reach. Such addresses are refused
// unless the operator allows them (ALERTS_WEBHOOK_ALLOW). Checked when a rule is added and, on
// the address actually connected to, at every send: a name that resolves elsewhere later (DNS
// rebinding) meets the same check.

/** Internal and special-purpose ranges, by name. IPv4 rules also match IPv4-mapped IPv6. */
const INTERNAL_RANGES: [name: string, network: string, prefix: number][] = [
  ["unspecified", "0.0.0.0", 8],
  ["private", "10.0.0.0", 8],
  ["shared (CGNAT)", "100.64.0.0", 10],
  ["loopback", "127.0.0.0", 8],
  ["link-local (cloud metadata)", "169.254.0.0", 16],
  ["private", "172.16.0.0", 12],
  ["special-purpose", "192.0.0.0", 24],
  ["documentation", "192.0.2.0", 24],
  ["private", "192.168.0.0", 16],
  ["benchmarking", "198.18.0.0", 15],
  ["documentation", "198.51.100.0", 24],
  ["documentation", "203.0.113.0", 24],
  ["multicast", "224.0.0.0", 4],
  ["reserved", "240.0.0.0", 4],
  // `::` and `::1` too; IPv4-compatible addresses (deprecated) would name an IPv4 one.
  ["unspecified or loopback", "::", 96],
  ["discard-only", "100::", 64],
  // The well-known NAT64 prefix 64:ff9b::/96 is judged by the IPv4 address it embeds (below); the
  // local-use one places it by the network's prefix length, which no one outside can read.
  ["local-use NAT64", "64:ff9b:1::", 48],
  // Teredo embeds a server's IPv4 address and a client's (obfuscated): none a webhook needs.
  ["Teredo", "2001::", 32],
  ["documentation", "2001:db8::", 32],
  // 6to4 embeds any IPv4 address, internal ones included.
  ["6to4", "2002::", 16],
  ["unique-local", "fc00::", 7],
  ["link-local", "fe80::", 10],
  ["site-local", "fec0::", 10],
  ["multicast", "ff00::", 8],
];

const ranges = INTERNAL_RANGES.map(([name, network, prefix]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, isIP(network) === 6 ? "ipv6" : "ipv4");
  return { name, list };
});

const family = (address: string) => (isIP(address) === 6 ? "ipv6" : "ipv4");

/** An IPv6 address's eight 16-bit groups (a trailing dotted IPv4 part read as two). */
function groupsOf(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const part = (t: string | undefined) =>
    t ? t.split(":").map((g) => Number.parseInt(g, 16)) : [];
  const h = part(head);
  const t = part(tail);
  return tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill(0), ...t];
}

/**
 * The IPv4 address an IPv6 one stands for where a translator or tunnel would take it there: the
 * well-known NAT64 prefix 64:ff9b::/96 (RFC 6052), IPv4-translated ::ffff:0:0:0/96 (SIIT, RFC
 * 2765) and ISATAP interface ids (…:0:5efe:a.b.c.d, …:200:5efe:a.b.c.d, any prefix), with the
 * form's name; null for any other. (IPv4-mapped addresses are matched by the IPv4 ranges
 * themselves, IPv4-compatible ones by ::/96, 6to4 and Teredo by their whole prefixes.)
 */
export function embeddedIPv4(address: string): { ipv4: string; form: string } | null {
  if (isIP(address) !== 6) return null;
  const g = groupsOf(address);
  if (g.length !== 8 || g.some((x) => !Number.isInteger(x))) return null;
  const ipv4 = `${(g[6] as number) >> 8}.${(g[6] as number) & 255}.${(g[7] as number) >> 8}.${(g[7] as number) & 255}`;
  const first6 = g.slice(0, 6).join(":");
  if (first6 === "100:65435:0:0:0:0") return { ipv4, form: "NAT64" };
  if (first6 === "0:0:0:0:65535:0") return { ipv4, form: "IPv4-translated (SIIT)" };
  if ((g[4] === 0 || g[4] === 0x200) && g[5] === 0x5efe) return { ipv4, form: "ISATAP" };
  return null;
}

/** The internal range an IP address is in (its name), or null for a public address. */
export function internalRange(address: string): string | null {
  if (isIP(address) === 0) return "not an IP address";
  const own = ranges.find((r) => r.list.check(address, family(address)))?.name;
  if (own) return own;
  // An IPv6 form a gateway turns into an internal IPv4 address is that address.
  const embedded = embeddedIPv4(address);
  const inner = embedded && internalRange(embedded.ipv4);
  return inner ? `${inner} (${embedded.ipv4} in ${embedded.form} form)` : null;
}

export class DestinationRefusedError extends Error {
  override name = "DestinationRefusedError";
}

export type { ResolvedAddress, Resolver };

/** `[::1]` → `::1`; `Hooks.Example.` → `hooks.example`. */
export const bareHost = (hostname: string) =>
  hostname
    .replace(/^\[(.*)\]$/, "$1")
    .replace(/\.$/, "")
    .toLowerCase();

export interface DestinationPolicy {
  /** Why `address` (reached through `host`) is refused, or null when it may be connected to. */
  refusal(host: string, address: string): string | null;
  /** Rule creation: the URL's host and every address its name resolves to must be allowed. */
  checkUrl(url: string): Promise<void>;
  /** For net.connect: resolves as the system does, refusing a name with a refused address. */
  lookup: LookupFunction;
}

/** The look-ups of a policy made without a resolver of its own: the system's DNS, 2 s, 32 at once. */
const DEFAULT_DNS = { servers: [], timeoutMs: 2_000, maxConcurrent: 32 } as const;

export function createDestinationPolicy(
  opts: { allow?: readonly string[]; resolve?: Resolver } = {},
): DestinationPolicy {
  // Bounded look-ups (webhook-dns.ts): a host whose DNS never answers costs its deadline, never a
  // thread of the pool every answer's compression shares.
  const resolve = opts.resolve ?? createWebhookResolver(DEFAULT_DNS);
  const hosts = new Set<string>();
  const allowed = new BlockList();
  for (const entry of opts.allow ?? []) {
    const [addr = "", bits] = entry.split("/");
    if (isIP(addr) === 0) hosts.add(bareHost(entry));
    else if (bits === undefined) allowed.addAddress(addr, family(addr));
    else allowed.addSubnet(addr, Number(bits), family(addr));
  }

  const refusal = (host: string, address: string): string | null => {
    if (hosts.has(bareHost(host))) return null;
    const bare = bareHost(address);
    if (isIP(bare) !== 0 && allowed.check(bare, family(bare))) return null;
    const embedded = embeddedIPv4(bare);
    if (embedded && allowed.check(embedded.ipv4, "ipv4")) return null;
    const range = internalRange(bare);
    return range && `${bare} is ${range}`;
  };

  /** The addresses `host` connects to, each checked. */
  async function resolveChecked(host: string): Promise<ResolvedAddress[]> {
    const bare = bareHost(host);
    const addresses = isIP(bare) ? [{ address: bare, family: isIP(bare) }] : await resolve(bare);
    if (addresses.length === 0) throw new DestinationRefusedError(`${bare} does not resolve`);
    for (const { address } of addresses) {
      const why = refusal(bare, address);
      if (why) {
        throw new DestinationRefusedError(
          `destination refused: ${bare === address ? why : `${bare} resolves to ${why}`} (an operator can allow it in ALERTS_WEBHOOK_ALLOW)`,
        );
      }
    }
    return addresses;
  }

  const lookup: LookupFunction = (hostname, options, callback) => {
    resolveChecked(hostname).then(
      (all) => {
        const wanted = options.family === 4 || options.family === 6 ? options.family : 0;
        const usable = wanted ? all.filter((a) => a.family === wanted) : all;
        const first = usable[0];
        if (options.all) callback(null, usable);
        else if (first) callback(null, first.address, first.family);
        else callback(new DestinationRefusedError(`${hostname} has no IPv${wanted} address`), "");
      },
      (err: Error) => callback(err as NodeJS.ErrnoException, ""),
    );
  };

  return {
    refusal,
    lookup,
    async checkUrl(url) {
      await resolveChecked(new URL(url).hostname);
    },
  };
}
