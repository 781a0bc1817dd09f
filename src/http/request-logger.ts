import type { FastifyBaseLogger } from "fastify";

// Each request's logger (`req.log`), made when the request first logs. An accepted report logs
// nothing, and a pino child per request (its bindings serialised, its redaction prepared) cost
// more than anything else its logging does; a request that logs gets the same child, with the
// same bindings (its request id), as Fastify's own factory would have made.

type Bindings = Parameters<FastifyBaseLogger["child"]>[0];
type ChildOptions = Parameters<FastifyBaseLogger["child"]>[1];
type Level = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

class RequestLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildOptions,
  ) {}

  private get logger(): FastifyBaseLogger {
    this.#child ??= this.parent.child(this.bindings, this.options);
    return this.#child;
  }

  get level(): string {
    return this.logger.level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options);
  }

  private log(level: Level, args: unknown[]): void {
    (this.logger[level] as (...a: unknown[]) => void)(...args);
  }

  fatal(...args: unknown[]): void {
    this.log("fatal", args);
  }
  error(...args: unknown[]): void {
    this.log("error", args);
  }
  warn(...args: unknown[]): void {
    this.log("warn", args);
  }
  info(...args: unknown[]): void {
    this.log("info", args);
  }
  debug(...args: unknown[]): void {
    this.log("debug", args);
  }
  trace(...args: unknown[]): void {
    this.log("trace", args);
  }
  silent(...args: unknown[]): void {
    this.log("silent", args);
  }
}

/** Fastify's `childLoggerFactory`: a request's child logger, made on its first use. */
export function lazyRequestLogger(
  parent: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildOptions,
): FastifyBaseLogger {
  return new RequestLogger(parent, bindings, options) as unknown as FastifyBaseLogger;
}
