import { connect } from "node:net";

// MONITOR on a socket of its own. ioredis' monitor() marks its connection as monitoring only a
// tick after MONITOR's OK, so on a busy server the first streamed command arrives as a reply to
// nothing and is thrown as "Command queue state error" (seen in CI).

export interface RedisMonitor {
  /** Each command the server ran since MONITOR's OK, as its arguments. */
  readonly commands: string[][];
  stop(): void;
}

export interface MonitorTarget {
  host?: string;
  port?: number;
  username?: string;
  password?: string;
}

/** Starts MONITOR on `target`; resolves once the server has said OK. */
export function monitorRedis(target: MonitorTarget): Promise<RedisMonitor> {
  const socket = connect(target.port ?? 6379, target.host ?? "127.0.0.1");
  const commands: string[][] = [];
  let pending = "";
  // Replies to AUTH (if any) and MONITOR come before the stream.
  let oksOwed = target.password ? 2 : 1;
  return new Promise((resolve, reject) => {
    // Before MONITOR's OK the start fails; after it, a failure ends the stream (and is no crash).
    socket.on("error", reject);
    socket.on("connect", () => {
      if (target.password) {
        const auth = target.username
          ? ["AUTH", target.username, target.password]
          : ["AUTH", target.password];
        socket.write(encodeCommand(auth));
      }
      socket.write(encodeCommand(["MONITOR"]));
    });
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      pending += chunk;
      let end = pending.indexOf("\r\n");
      while (end >= 0) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 2);
        end = pending.indexOf("\r\n");
        if (line.startsWith("-")) {
          reject(new Error(`MONITOR: ${line.slice(1)}`));
          socket.destroy();
          return;
        }
        if (oksOwed > 0) {
          if (line === "+OK" && --oksOwed === 0)
            resolve({ commands, stop: () => socket.destroy() });
          continue;
        }
        commands.push(monitorArgs(line));
      }
    });
  });
}

function encodeCommand(args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("")}`;
}

const ESCAPES: Record<string, string> = { n: "\n", r: "\r", t: "\t", a: "\x07", b: "\b" };

/** The arguments of one MONITOR line: `+<time> [<db> <client>] "arg" "arg" …`, each quoted as
 * Redis' sdscatrepr quotes (backslash escapes, \xHH for other bytes). */
export function monitorArgs(line: string): string[] {
  const args: string[] = [];
  let i = line.indexOf("] ");
  if (i < 0) throw new Error(`not a MONITOR line: ${line}`);
  i += 2;
  while (i < line.length) {
    if (line[i] !== '"') throw new Error(`not a MONITOR line at ${i}: ${line}`);
    let arg = "";
    i++;
    while (line[i] !== '"') {
      if (i >= line.length) throw new Error(`unterminated argument: ${line}`);
      if (line[i] === "\\") {
        const next = line[i + 1] ?? "";
        if (next === "x") {
          arg += String.fromCharCode(Number.parseInt(line.slice(i + 2, i + 4), 16));
          i += 4;
        } else {
          arg += ESCAPES[next] ?? next;
          i += 2;
        }
      } else arg += line[i++];
    }
    args.push(Buffer.from(arg, "latin1").toString("utf8"));
    i += 2; // the closing quote and the space before the next argument
  }
  return args;
}
