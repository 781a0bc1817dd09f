import { readFileSync } from "node:fs";
import { createServer } from "node:net";

// Ports for the servers a test starts, picked below the machine's ephemeral range. A port found
// by listening on port 0 comes from that range, and once let go it is anyone's again: the next
// listen on 0 (a stack's own ClickHouse or Redis, another test's server) or an outgoing
// connection can take it before the test's server binds it, seconds later. A CI run once saw
// `npm start`'s edge refused with EADDRINUSE on the PORT its test had picked that way. Below the
// range only another pick like this one can land, and this process never hands a port out twice.

const LOWEST = 20_000;
/** Linux's default first ephemeral port, where /proc cannot say. */
const DEFAULT_EPHEMERAL_FIRST = 32_768;
const TRIES = 200;

const handedOut = new Set<number>();

function ephemeralFirst(): number {
  try {
    const [first] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
      .trim()
      .split(/\s+/)
      .map(Number);
    if (first !== undefined && Number.isInteger(first)) return first;
  } catch {
    // not Linux: its default
  }
  return DEFAULT_EPHEMERAL_FIRST;
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/** A port nothing listens on now, outside the ephemeral range, not handed out before. */
export async function freePort(): Promise<number> {
  const end = ephemeralFirst();
  if (end - LOWEST < 1_000) {
    throw new Error(`the ephemeral range starts at ${end}: no room below it for test ports`);
  }
  for (let i = 0; i < TRIES; i++) {
    const port = LOWEST + Math.floor(Math.random() * (end - LOWEST));
    if (handedOut.has(port) || !(await canListen(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port between ${LOWEST} and ${end} after ${TRIES} tries`);
}

/** `count` distinct free ports. */
export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < count) ports.push(await freePort());
  return ports;
}
