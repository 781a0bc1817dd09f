import { Redis, type RedisOptions } from "ioredis";

// A connection whose handshake never ends: ioredis's connectTimeout stops at the TCP connect, and
// nothing bounds the ready check (INFO, and AUTH / SELECT / CLIENT SETNAME before it) that
// follows. A flow that goes silently dead between the two (Redis restarted behind a NAT, a freeze
// landing on a connection being made again) leaves the client in "connect" for good: its
// commands wait in the offline queue (or fail at once without one), BullMQ's own blocking-
// connection watchdog waits for a "ready" that never comes, and a stall watchdog's probe cannot
// even ask. So a connection not ready within READY_TIMEOUT_MS of connecting is dropped and made
// again (the client's retryStrategy); its duplicates (BullMQ's blocking connections, probes)
// are made the same way. A Redis still loading its data set answers the check, and is asked
// again on the new connection.

/** A healthy handshake takes milliseconds; a loaded machine, well under this. */
export const READY_TIMEOUT_MS = 5_000;

export class ReadyGuardedRedis extends Redis {
  #timer: NodeJS.Timeout | null = null;

  constructor(urlOrOptions: string | RedisOptions, options: RedisOptions = {}) {
    if (typeof urlOrOptions === "string") super(urlOrOptions, options);
    else super(urlOrOptions);
    this.on("connect", () => {
      this.#clear();
      this.#timer = setTimeout(() => {
        this.#timer = null;
        if (this.status === "connect") this.disconnect(true);
      }, READY_TIMEOUT_MS);
      this.#timer.unref();
    });
    for (const settled of ["ready", "close", "end"]) this.on(settled, () => this.#clear());
  }

  #clear(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  override duplicate(override?: Partial<RedisOptions>): ReadyGuardedRedis {
    return new ReadyGuardedRedis({ ...this.options, ...override });
  }
}
