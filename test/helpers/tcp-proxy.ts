import type { AddressInfo } from "node:net";
import { connect, createServer, type Socket } from "node:net";

// A TCP proxy that can make its open connections go silently dead: after `freeze()` nothing
// more passes through them either way, and neither side is told (no FIN, no RST) — what clients
// see when the server behind them restarts and a NAT, a load balancer or a lost host keeps their
// old connections looking open. Connections made after the freeze pass normally, unless
// `freezeArrivals` makes each new one dead from its first byte (a handshake that never ends);
// `reset()` closes every open connection, so that clients make theirs again.

interface Pair {
  client: Socket;
  server: Socket;
  frozen: boolean;
}

export async function startTcpProxy(targetPort: number, targetHost = "127.0.0.1") {
  const pairs = new Set<Pair>();
  let arrivalsFrozen = false;
  const proxy = createServer((client) => {
    const server = connect(targetPort, targetHost);
    const pair: Pair = { client, server, frozen: arrivalsFrozen };
    pairs.add(pair);
    client.on("data", (d: Buffer) => {
      if (!pair.frozen) server.write(d);
    });
    server.on("data", (d: Buffer) => {
      if (!pair.frozen) client.write(d);
    });
    const close = () => {
      // A frozen connection stays open on the client's side, whatever the server did.
      if (!pair.frozen) client.destroy();
      server.destroy();
      if (!pair.frozen) pairs.delete(pair);
    };
    server.on("error", close);
    server.on("close", close);
    client.on("error", () => {
      server.destroy();
      pairs.delete(pair);
    });
    client.on("close", () => {
      server.destroy();
      pairs.delete(pair);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", () => resolve()));
  const port = (proxy.address() as AddressInfo).port;
  return {
    port,
    /** Connections open now, frozen ones included. */
    open: () => pairs.size,
    /** Every connection open now goes silently dead. Returns how many. */
    freeze(): number {
      let n = 0;
      for (const pair of pairs) {
        if (!pair.frozen) n += 1;
        pair.frozen = true;
      }
      return n;
    },
    /** While on, every connection made is dead from its first byte. */
    freezeArrivals(on: boolean): void {
      arrivalsFrozen = on;
    },
    /** Closes every open connection (frozen ones too): clients connect again. Returns how many. */
    reset(): number {
      const n = pairs.size;
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        pair.client.destroy();
        pair.server.destroy();
      }
      return n;
    },
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.server.destroy();
      }
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

export type TcpProxy = Awaited<ReturnType<typeof startTcpProxy>>;
