import type { AddressInfo } from "node:net";
import { connect, createServer, type Socket } from "node:net";

// A TCP proxy in front of Redis that reads the commands clients send (RESP arrays) and, armed,
// cuts the connection at the nth command a predicate picks out: `before` closes it without
// forwarding that command (Redis never applies it), `after` forwards it, waits until Redis
// answered (a PING of the proxy's own, answered after it), and closes it without passing the
// answer on (Redis applied it, the client never learns); `hold` keeps that command and every
// later one of its connection, unanswered and open, until release(). Everything else passes
// unchanged.

export type CutMode = "before" | "after" | "hold";

interface Arm {
  match: (args: string[]) => boolean;
  nth: number;
  mode: CutMode;
  seen: number;
  /** What the cut command was, once it was cut. */
  cut?: string;
}

/** Whole RESP arrays of bulk strings at the start of `buf`: each command and its byte length. */
function parseCommands(buf: Buffer): { args: string[]; bytes: number }[] {
  const out: { args: string[]; bytes: number }[] = [];
  let at = 0;
  const line = (from: number): [string, number] | null => {
    const end = buf.indexOf("\r\n", from);
    return end < 0 ? null : [buf.toString("latin1", from, end), end + 2];
  };
  for (;;) {
    const start = at;
    const head = line(at);
    if (!head?.[0].startsWith("*")) return out;
    const n = Number(head[0].slice(1));
    at = head[1];
    const args: string[] = [];
    for (let i = 0; i < n; i++) {
      const len = line(at);
      if (!len) return out;
      const size = Number(len[0].slice(1));
      if (len[1] + size + 2 > buf.length) return out;
      args.push(buf.toString("utf8", len[1], len[1] + size));
      at = len[1] + size + 2;
    }
    out.push({ args, bytes: at - start });
    if (at === start) return out;
  }
}

export async function startRespCutProxy(targetPort: number, targetHost = "127.0.0.1") {
  const sockets = new Set<Socket>();
  let arm: Arm | null = null;
  /** What passes the held connections' commands on. */
  const releases = new Set<() => void>();
  const proxy = createServer((client) => {
    const server = connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(server);
    let pending: Buffer = Buffer.alloc(0);
    let muted = false;
    let holding = false;
    const close = () => {
      client.destroy();
      server.destroy();
      sockets.delete(client);
      sockets.delete(server);
    };
    client.on("data", (d: Buffer) => {
      if (muted) return;
      pending = pending.length === 0 ? d : Buffer.concat([pending, d]);
      if (holding) return;
      let forward = 0;
      for (const cmd of parseCommands(pending)) {
        const a = arm;
        if (a && a.cut === undefined && a.match(cmd.args) && ++a.seen === a.nth) {
          a.cut = cmd.args.slice(0, 2).join(" ").replace(/\s+/g, " ").slice(0, 60);
          if (a.mode === "hold") {
            server.write(pending.subarray(0, forward));
            pending = pending.subarray(forward);
            holding = true;
            const release = () => {
              releases.delete(release);
              holding = false;
              server.write(pending);
              pending = Buffer.alloc(0);
            };
            releases.add(release);
            return;
          }
          if (a.mode === "after") forward += cmd.bytes;
          server.write(pending.subarray(0, forward));
          muted = true;
          if (a.mode === "before") return close();
          // Redis answers in order: once the PING is answered, the command was applied.
          let answers = "";
          server.removeAllListeners("data");
          server.on("data", (r: Buffer) => {
            answers += r.toString("latin1");
            if (answers.endsWith("+PONG\r\n")) close();
          });
          server.write("*1\r\n$4\r\nPING\r\n");
          return;
        }
        forward += cmd.bytes;
      }
      server.write(pending.subarray(0, forward));
      pending = pending.subarray(forward);
    });
    server.on("data", (d: Buffer) => {
      if (!muted) client.write(d);
    });
    server.on("error", close);
    server.on("close", close);
    client.on("error", close);
    client.on("close", close);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", () => resolve()));
  const port = (proxy.address() as AddressInfo).port;
  return {
    port,
    /** Cuts at the nth command from now that `match` picks out. */
    arm(match: Arm["match"], nth: number, mode: CutMode): void {
      arm = { match, nth, mode, seen: 0 };
    },
    /** Which command was cut (or is held) so far, without disarming. */
    cut: (): string | null => arm?.cut ?? null,
    /** Passes on what `hold` kept, and everything after it. */
    release(): void {
      for (const release of [...releases]) release();
    },
    /** Disarms; says which command was cut (`EVALSHA <sha>`, …), or null if none was. */
    disarm(): { cut: string | null; seen: number } {
      const a = arm;
      arm = null;
      return { cut: a?.cut ?? null, seen: a?.seen ?? 0 };
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

export type RespCutProxy = Awaited<ReturnType<typeof startRespCutProxy>>;
