import { ClickHouseError } from "@clickhouse/client";
import { describe, expect, it } from "vitest";
import { CliError, describeFailure, UsageError } from "../../src/cli/errors.js";
import { ConfigError } from "../../src/config.js";
import { KeyStoreError } from "../../src/keys/key-store.js";

// What a failed command prints and how it exits: a stack trace only for a bug.

describe("describeFailure", () => {
  it("gives usage and configuration mistakes exit code 2, message only", () => {
    for (const err of [
      new UsageError("--rows replays one job"),
      new ConfigError("invalid configuration:\n  PORT: bad"),
      new KeyStoreError("project id must be 1-64 characters"),
    ]) {
      expect(describeFailure(err)).toEqual({ message: err.message, exitCode: 2 });
    }
  });

  it("prints a ClickHouse error as ClickHouse does: code, message, type", () => {
    const err = new ClickHouseError({
      message: "Unknown table expression identifier 'x' in scope SELECT * FROM x. ",
      code: "60",
      type: "UNKNOWN_TABLE",
    });
    expect(describeFailure(err)).toEqual({
      message:
        "Code: 60. Unknown table expression identifier 'x' in scope SELECT * FROM x. (UNKNOWN_TABLE)",
      exitCode: 1,
    });
  });

  it("recognises the in-process engine's ClickHouseError, another class of the same shape", () => {
    const err = Object.assign(new Error("Database nodb does not exist. "), {
      code: "81",
      type: "UNKNOWN_DATABASE",
    });
    expect(describeFailure(err).message).toBe(
      "Code: 81. Database nodb does not exist. (UNKNOWN_DATABASE)",
    );
  });

  it("gives an unreachable service its message, exit 1", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:8123"), {
      code: "ECONNREFUSED",
    });
    expect(describeFailure(refused)).toEqual({ message: refused.message, exitCode: 1 });
    expect(describeFailure(new CliError("cannot reach Redis"))).toEqual({
      message: "cannot reach Redis",
      exitCode: 1,
    });
  });

  it("shows the stack of an error nobody expected: it is a bug", () => {
    const bug = new TypeError("x is undefined");
    const failure = describeFailure(bug);
    expect(failure.exitCode).toBe(1);
    expect(failure.message).toContain("TypeError: x is undefined\n    at ");
  });
});
