import { isClickHouseError } from "../clickhouse/classify-error.js";
import { ConfigError } from "../config.js";
import { KeyStoreError } from "../keys/key-store.js";

// How a failed command is reported: one line a person can act on, and an exit code. Usage and
// configuration mistakes exit 2; a ClickHouse error prints ClickHouse's message and code, as
// clickhouse-client does, and exits 1; only a bug (an error nobody expected) shows a stack.

export class UsageError extends Error {
  override name = "UsageError";
}

/** A failure to report as its message alone (an unreachable service, a refused request). */
export class CliError extends Error {
  override name = "CliError";
}

/** A command that has printed its own outcome, a failure: exit with its code, nothing more said. */
export class CommandFailed extends Error {
  override name = "CommandFailed";
  constructor(readonly exitCode: number) {
    super(`the command failed (exit ${exitCode})`);
  }
}

export interface Failure {
  message: string;
  exitCode: number;
}

/** Node's system errors (ECONNREFUSED, ENOENT, …): their message says what happened. */
function isSystemError(err: unknown): err is NodeJS.ErrnoException {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return err instanceof Error && typeof code === "string" && /^E[A-Z_]+$/.test(code);
}

export function describeFailure(err: unknown): Failure {
  if (err instanceof UsageError || err instanceof ConfigError || err instanceof KeyStoreError) {
    return { message: err.message, exitCode: 2 };
  }
  if (isClickHouseError(err)) {
    const type = err.type ? ` (${err.type})` : "";
    return { message: `Code: ${err.code}. ${err.message.trim()}${type}`, exitCode: 1 };
  }
  if (err instanceof CliError || isSystemError(err)) return { message: err.message, exitCode: 1 };
  return { message: String((err as Error)?.stack ?? err), exitCode: 1 };
}
