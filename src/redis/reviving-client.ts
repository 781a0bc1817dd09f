import type { Redis, RedisOptions } from "ioredis";
import { ReadyGuardedRedis } from "./ready-guard.js";

// ioredis ends a Sentinel client for good when a failover is announced while the client is
// reconnecting: its failover detector closes the connector under connect(), the rejected connect
// sets the status to "end" without asking retryStrategy, and every later command fails with
// "Connection is closed" (redis/ioredis#1683). Seen here as a worker that never stored again
// after a Sentinel failover. A client that ioredis ended, not its owner, connects again, with a
// backoff; its duplicates (BullMQ's blocking connections) are made the same way. Its handshake
// is bounded as every client's is (ready-guard.ts).

const BACKOFF_MS = [100, 200, 500, 1_000, 2_000];

export class RevivingRedis extends ReadyGuardedRedis {
  #closedByOwner = false;
  #attempts = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(options: RedisOptions) {
    super(options);
    this.on("ready", () => {
      this.#attempts = 0;
    });
    this.on("end", () => this.#revive());
  }

  #revive(): void {
    if (this.#closedByOwner || this.#timer) return;
    const delay = BACKOFF_MS[Math.min(this.#attempts++, BACKOFF_MS.length - 1)] as number;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      // A rejected connect ends the client again, and so comes back here.
      if (!this.#closedByOwner && this.status === "end") this.connect().catch(() => {});
    }, delay);
    this.#timer.unref();
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) this.#stop();
    super.disconnect(reconnect);
  }

  override quit(...args: Parameters<Redis["quit"]>): ReturnType<Redis["quit"]> {
    this.#stop();
    return super.quit(...args);
  }

  override duplicate(override?: Partial<RedisOptions>): RevivingRedis {
    return new RevivingRedis({ ...this.options, ...override });
  }

  #stop(): void {
    this.#closedByOwner = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
