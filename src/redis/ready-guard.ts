import { type Command, Redis, type RedisOptions } from "ioredis";

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

/** ioredis's error for a command unanswered within commandTimeout. */
export const COMMAND_TIMED_OUT = "Command timed out";

/** A healthy handshake takes milliseconds; a loaded machine, well under this. */
export const READY_TIMEOUT_MS = 5_000;

export class ReadyGuardedRedis extends Redis {
  #timer: NodeJS.Timeout | null = null;
  /** Counts the connections made ready: which one a command was sent on. */
  #connection = 0;

  /** Whether a command's timeout drops its connection (below); duplicates do not inherit it. */
  readonly #dropOnTimeout: boolean;
  /** Commands sent at least once: ioredis times a command from its first sending. */
  readonly #sent = new WeakSet<Command>();

  constructor(
    urlOrOptions: string | RedisOptions,
    options: RedisOptions = {},
    opts: { dropOnTimeout?: boolean } = {},
  ) {
    if (typeof urlOrOptions === "string") super(urlOrOptions, options);
    else super(urlOrOptions);
    this.#dropOnTimeout = opts.dropOnTimeout === true;
    this.on("connect", () => {
      this.#clear();
      this.#timer = setTimeout(() => {
        this.#timer = null;
        if (this.status === "connect") this.disconnect(true);
      }, READY_TIMEOUT_MS);
      this.#timer.unref();
    });
    this.on("ready", () => this.#connection++);
    for (const settled of ["ready", "close", "end"]) this.on(settled, () => this.#clear());
  }

  // With dropOnTimeout (the edge's and the read API's own clients, connections.ts): a command
  // unanswered within commandTimeout says the same of its connection: it may be silently dead, and
  // every command after it would wait as long. It is dropped at once and made again, so the next
  // request fails fast (or succeeds) instead of waiting for a periodic check to notice. Only a
  // command first sent on the connection that is ready now: ioredis starts a command's timer at
  // its first sending, and one sent again on a new connection (ioredis resends what was
  // unanswered, and flushes its offline queue) keeps that timer, and must not drop the new one.
  // Duplicates with timeouts of their own (a watchdog's probe, the shared limits' fallback) renew
  // their connection themselves, as before. (The timer that fired is the whole timeout: timing
  // the command again with performance.now() missed drops, as Node's timers count whole
  // milliseconds and fire up to 1 ms short of its count.)
  override sendCommand(command: Command, stream?: Parameters<Redis["sendCommand"]>[1]): unknown {
    const first = this.#dropOnTimeout && !this.#sent.has(command);
    const watch =
      first && typeof this.options.commandTimeout === "number" && this.status === "ready";
    const on = this.#connection;
    if (first) this.#sent.add(command);
    const sent = super.sendCommand(command, stream);
    if (watch) {
      command.promise.catch((err: unknown) => {
        if (
          err instanceof Error &&
          err.message === COMMAND_TIMED_OUT &&
          this.status === "ready" &&
          this.#connection === on
        )
          this.disconnect(true);
      });
    }
    return sent;
  }

  #clear(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  override duplicate(override?: Partial<RedisOptions>): ReadyGuardedRedis {
    return new ReadyGuardedRedis({ ...this.options, ...override });
  }
}
