import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createDestinationPolicy,
  DestinationRefusedError,
  internalRange,
  type Resolver,
} from "../../src/alerts/destination-policy.js";
import { createGuardedFetch } from "../../src/alerts/guarded-fetch.js";
import { newSecret } from "../../src/alerts/signing.js";
import { sendWebhook } from "../../src/alerts/webhook-sender.js";
import { ConfigError, loadConfig } from "../../src/config.js";

// Which addresses a tenant's webhook may reach: internal ranges refused in every form an address
// can take, unless the operator allows them; checked on the address connected to, so a name
// that resolves elsewhere at send time (DNS rebinding) is refused then.

describe("internalRange", () => {
  const internal: [string, string][] = [
    ["0.0.0.0", "unspecified"],
    ["0.255.255.255", "unspecified"],
    ["10.0.0.1", "private"],
    ["10.255.255.255", "private"],
    ["100.64.0.0", "shared (CGNAT)"],
    ["100.127.255.255", "shared (CGNAT)"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["169.254.169.254", "link-local (cloud metadata)"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["198.18.0.1", "benchmarking"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["255.255.255.255", "reserved"],
    ["::", "unspecified or loopback"],
    ["::1", "unspecified or loopback"],
    ["0:0:0:0:0:0:0:1", "unspecified or loopback"],
    ["::127.0.0.1", "unspecified or loopback"],
    ["fc00::1", "unique-local"],
    ["fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique-local"],
    ["fe80::1", "link-local"],
    ["febf:ffff::1", "link-local"],
    ["fec0::1", "site-local"],
    ["ff02::1", "multicast"],
    ["2001:db8::1", "documentation"],
    ["2002:7f00:1::", "6to4"],
    // IPv4-mapped IPv6: the IPv4 address's range, however it is written.
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["0:0:0:0:0:ffff:7f00:1", "loopback"],
    ["::ffff:a9fe:a9fe", "link-local (cloud metadata)"],
    ["::ffff:10.1.2.3", "private"],
    ["::ffff:0.0.0.0", "unspecified"],
    // Forms a translator or tunnel turns into an internal IPv4 address (issue 42).
    ["64:ff9b::7f00:1", "loopback (127.0.0.1 in NAT64 form)"],
    ["64:ff9b::10.1.2.3", "private (10.1.2.3 in NAT64 form)"],
    ["64:ff9b::a9fe:a9fe", "link-local (cloud metadata) (169.254.169.254 in NAT64 form)"],
    ["64:ff9b:1::a00:1", "local-use NAT64"],
    ["::ffff:0:7f00:1", "loopback (127.0.0.1 in IPv4-translated (SIIT) form)"],
    ["::ffff:0:10.0.0.1", "private (10.0.0.1 in IPv4-translated (SIIT) form)"],
    ["::ffff:0:0.0.0.0", "unspecified (0.0.0.0 in IPv4-translated (SIIT) form)"],
    ["2606:4700::5efe:a00:1", "private (10.0.0.1 in ISATAP form)"],
    ["2606:4700::200:5efe:127.0.0.1", "loopback (127.0.0.1 in ISATAP form)"],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"],
    ["0.1.2.3", "unspecified"],
  ];
  it.each(internal)("%s is %s", (address, range) => {
    expect(internalRange(address)).toBe(range);
  });

  const external = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255",
    "100.128.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "169.253.255.255",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "fbff:ffff::1",
    "fe00::1",
    "::ffff:8.8.8.8",
    // A public IPv4 address behind the well-known NAT64 prefix (a DNS64 network's AAAA answer).
    "64:ff9b::808:808",
    "::ffff:0:808:808",
    "2606:4700::5efe:808:808",
  ];
  it.each(external)("%s is public", (address) => {
    expect(internalRange(address)).toBeNull();
  });

  it("an IPv6 form that embeds an IPv4 address is refused exactly when the IPv4 one is", () => {
    fc.assert(
      fc.property(
        fc.ipV4(),
        fc.constantFrom("64:ff9b::", "::ffff:0:", "2606:4700::5efe:"),
        (v4, prefix) => {
          expect(internalRange(`${prefix}${v4}`) === null).toBe(internalRange(v4) === null);
        },
      ),
    );
  });

  it("an IPv4 address and its IPv4-mapped forms are in the same range", () => {
    fc.assert(
      fc.property(fc.ipV4(), (v4) => {
        const [a = 0, b = 0, c = 0, d = 0] = v4.split(".").map(Number);
        const hex = `::ffff:${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
        expect(internalRange(`::ffff:${v4}`)).toBe(internalRange(v4));
        expect(internalRange(hex)).toBe(internalRange(v4));
      }),
    );
  });
});

describe("the operator's allowance", () => {
  const policy = createDestinationPolicy({
    allow: ["10.0.0.0/8", "::1", "Hooks.Internal.", "fd00:1::/32"],
  });

  it("allows the listed CIDRs, addresses and hosts, and nothing else internal", () => {
    expect(policy.refusal("x", "10.20.30.40")).toBeNull();
    expect(policy.refusal("x", "::ffff:10.0.0.1")).toBeNull();
    expect(policy.refusal("x", "::1")).toBeNull();
    expect(policy.refusal("x", "fd00:1:2::3")).toBeNull();
    expect(policy.refusal("hooks.internal", "192.168.0.9")).toBeNull();
    expect(policy.refusal("x", "11.0.0.1")).toBeNull();
    expect(policy.refusal("x", "127.0.0.1")).toBe("127.0.0.1 is loopback");
    expect(policy.refusal("x", "192.168.0.9")).toBe("192.168.0.9 is private");
    expect(policy.refusal("x", "fd00:2::1")).toBe("fd00:2::1 is unique-local");
    expect(policy.refusal("hooks.internal.evil", "10.0.0.1")).toBeNull();
    expect(policy.refusal("hooks.internal.evil", "172.16.0.1")).toBe("172.16.0.1 is private");
  });

  it("is read from ALERTS_WEBHOOK_ALLOW, whose bad entries are named", () => {
    expect(
      loadConfig({ ALERTS_WEBHOOK_ALLOW: " hooks.internal, 10.0.0.0/8,::1 " }).ALERTS_WEBHOOK_ALLOW,
    ).toEqual(["hooks.internal", "10.0.0.0/8", "::1"]);
    expect(loadConfig({}).ALERTS_WEBHOOK_ALLOW).toEqual([]);
    expect(() => loadConfig({ ALERTS_WEBHOOK_ALLOW: "10.0.0.0/33,http://x" })).toThrow(ConfigError);
    expect(() => loadConfig({ ALERTS_WEBHOOK_ALLOW: "10.0.0.0/33" })).toThrow(
      /ALERTS_WEBHOOK_ALLOW: .*not 10\.0\.0\.0\/33/,
    );
  });
});

describe("a rule's webhook, at creation", () => {
  const names: Record<string, string[]> = {
    "public.example": ["93.184.216.34", "2606:2800:220:1::1"],
    "internal.example": ["10.0.0.5"],
    "mixed.example": ["93.184.216.34", "169.254.169.254"],
  };
  const resolve: Resolver = async (host) =>
    (names[host] ?? []).map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  const policy = createDestinationPolicy({ resolve });

  it.each([
    ["http://127.0.0.1:8123/?query=INSERT", /127\.0\.0\.1 is loopback/],
    ["http://[::1]/", /::1 is unspecified or loopback/],
    ["http://[::ffff:7f00:1]/", /is loopback/],
    ["http://2130706433/", /127\.0\.0\.1 is loopback/],
    ["http://0x7f.1/", /127\.0\.0\.1 is loopback/],
    ["http://0.0.0.0:6379/", /unspecified/],
    ["http://169.254.169.254/latest/meta-data/", /link-local \(cloud metadata\)/],
    ["https://internal.example/hook", /internal\.example resolves to 10\.0\.0\.5 is private/],
    ["https://mixed.example/hook", /resolves to 169\.254\.169\.254/],
    ["https://nowhere.example/hook", /does not resolve/],
  ])("%s is refused", async (url, message) => {
    const refused = policy.checkUrl(url);
    await expect(refused).rejects.toThrow(DestinationRefusedError);
    await expect(refused).rejects.toThrow(message);
  });

  it("a public destination is accepted", async () => {
    await expect(policy.checkUrl("https://public.example/hook")).resolves.toBeUndefined();
    await expect(policy.checkUrl("https://8.8.8.8/hook")).resolves.toBeUndefined();
  });
});

describe("a webhook, when it is sent", () => {
  let server: Server;
  let port: number;
  let hits = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      hits += 1;
      req.resume();
      req.on("end", () => res.writeHead(204).end());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const send = (fetch: ReturnType<typeof createGuardedFetch>["fetch"], url: string) =>
    sendWebhook({ url, id: "evt_1", body: "{}", secret: newSecret(), timeoutMs: 10_000, fetch });

  it("a name that resolved publicly at creation and to loopback now is refused, unsent", async () => {
    let answers = ["93.184.216.34"];
    const resolve: Resolver = async () => answers.map((address) => ({ address, family: 4 }));
    const policy = createDestinationPolicy({ resolve });
    const url = `http://rebind.example:${port}/hook`;
    await policy.checkUrl(url);
    answers = ["127.0.0.1"];
    const guarded = createGuardedFetch(policy);
    const before = hits;
    const res = await send(guarded.fetch, url);
    guarded.close();
    expect(res).toMatchObject({ ok: false, status: null, refused: true });
    expect(res.error).toMatch(/rebind\.example resolves to 127\.0\.0\.1 is loopback/);
    expect(hits).toBe(before);
  });

  it.each([
    `http://127.0.0.1:PORT/`,
    `http://[::ffff:7f00:1]:PORT/`,
    `http://2130706433:PORT/`,
    `http://localhost:PORT/`,
  ])("%s is refused, unsent", async (template) => {
    const guarded = createGuardedFetch(createDestinationPolicy());
    const before = hits;
    const res = await send(guarded.fetch, template.replace("PORT", String(port)));
    guarded.close();
    expect(res).toMatchObject({ ok: false, status: null, refused: true });
    expect(res.error).toMatch(/is (unspecified or )?loopback/);
    expect(hits).toBe(before);
  });

  it("an allowed name connects to the address it resolves to", async () => {
    const resolve: Resolver = async () => [{ address: "127.0.0.1", family: 4 }];
    const guarded = createGuardedFetch(
      createDestinationPolicy({ allow: ["receiver.internal"], resolve }),
    );
    const before = hits;
    const res = await send(guarded.fetch, `http://receiver.internal:${port}/hook`);
    guarded.close();
    expect(res).toEqual({ ok: true, status: 204 });
    expect(hits).toBe(before + 1);
  });

  it("an allowed CIDR lets a send through to a receiver inside the network", async () => {
    const guarded = createGuardedFetch(createDestinationPolicy({ allow: ["127.0.0.0/8"] }));
    const res = await send(guarded.fetch, `http://localhost:${port}/hook`);
    guarded.close();
    expect(res).toEqual({ ok: true, status: 204 });
  });
});
