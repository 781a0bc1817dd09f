import { createServer } from "node:net";
import type { Config } from "../config.js";
import { type PortHolder, portHolder } from "./running-stack.js";

// Before the local stack starts anything, each port it will listen on is tried: a port that
// another program holds is said in one line, with the setting that moves it, instead of a banner
// followed by the children's EADDRINUSE traces and restarts; a port a running Headroom holds is
// said to be Headroom's, with its PID.

export class PortTakenError extends Error {}

interface Listener {
  setting: string;
  host: string;
  port: number;
}

export function stackListeners(config: Config): Listener[] {
  const all: (Listener | undefined)[] = [
    { setting: "PORT", host: config.HOST, port: config.PORT },
    { setting: "API_PORT", host: config.HOST, port: config.API_PORT },
    config.METRICS_PORT === undefined
      ? undefined
      : { setting: "METRICS_PORT", host: config.HOST, port: config.METRICS_PORT },
    typeof config.CONTROL_LISTEN === "number"
      ? { setting: "CONTROL_LISTEN", host: config.HOST, port: config.CONTROL_LISTEN }
      : undefined,
    {
      setting: "WORKER_METRICS_PORT",
      host: config.WORKER_METRICS_HOST,
      port: config.WORKER_METRICS_PORT,
    },
    {
      setting: "ALERTS_METRICS_PORT",
      host: config.WORKER_METRICS_HOST,
      port: config.ALERTS_METRICS_PORT,
    },
    config.STACK_REDIS_PORT === undefined
      ? undefined
      : { setting: "STACK_REDIS_PORT", host: "127.0.0.1", port: config.STACK_REDIS_PORT },
    config.STACK_CLICKHOUSE_PORT === undefined
      ? undefined
      : { setting: "STACK_CLICKHOUSE_PORT", host: "127.0.0.1", port: config.STACK_CLICKHOUSE_PORT },
  ];
  // Port 0 asks the system for a free one: nothing to check.
  return all.filter((l): l is Listener => l !== undefined && l.port !== 0);
}

function tryListen({ host, port }: Listener): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => resolve(err));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/** Who holds a port, in words: Headroom (which of its processes, which stack) or another program. */
export function describeHolder(holder: PortHolder | null): string {
  if (holder === null) return "is in use by another program; stop that program";
  if (holder.headroom === null) {
    return `is in use by another program (PID ${holder.pid}); stop that program`;
  }
  const what = holder.headroom.split("/").pop();
  return holder.stackPid !== null && holder.stackPid !== holder.pid
    ? `is held by a running Headroom (its ${what}, PID ${holder.pid}, of the stack npm start runs as PID ${holder.stackPid}); stop that Headroom (Ctrl-C in its terminal, or kill ${holder.stackPid})`
    : `is held by a running Headroom (${holder.headroom}, PID ${holder.pid}); stop that Headroom (kill ${holder.pid})`;
}

/** Throws a PortTakenError naming the first port that cannot be listened on, and its setting. */
export async function assertPortsFree(
  listeners: Listener[],
  holderOf: (port: number) => PortHolder | null = portHolder,
): Promise<void> {
  for (const l of listeners) {
    const err = await tryListen(l);
    if (!err) continue;
    const why =
      err.code === "EADDRINUSE"
        ? describeHolder(holderOf(l.port))
        : `cannot be used (${err.code}); choose another`;
    throw new PortTakenError(
      `npm start: port ${l.port} on ${l.host} (${l.setting}) ${why} or move Headroom with ${l.setting}=<another port>, e.g. ${l.setting}=${l.port + 100} npm start`,
    );
  }
}
