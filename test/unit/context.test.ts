import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cliConfig } from "../../src/cli/context.js";
import { removeStackFile, writeStackFile } from "../../src/local/stack-file.js";

// The CLI finds the running local stack through stack.json in HEADROOM_DATA_DIR, the directory
// `npm start` writes it to; the environment still wins.

const dir = mkdtempSync(join(tmpdir(), "headroom-cli-context-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("cliConfig", () => {
  it("takes the stack's addresses from HEADROOM_DATA_DIR/stack.json", () => {
    writeStackFile(dir, {
      REDIS_URL: "redis://127.0.0.1:16379",
      CLICKHOUSE_URL: "http://127.0.0.1:18123",
      CLICKHOUSE_DATABASE: "stackdb",
    });
    const c = cliConfig({ HEADROOM_DATA_DIR: dir });
    expect(c.REDIS_URL).toBe("redis://127.0.0.1:16379");
    expect(c.CLICKHOUSE_URL).toBe("http://127.0.0.1:18123");
    expect(c.CLICKHOUSE_DATABASE).toBe("stackdb");
  });

  it("lets the environment override the stack, an empty variable does not", () => {
    writeStackFile(dir, { REDIS_URL: "redis://127.0.0.1:16379" });
    expect(
      cliConfig({ HEADROOM_DATA_DIR: dir, REDIS_URL: "redis://elsewhere:6379" }).REDIS_URL,
    ).toBe("redis://elsewhere:6379");
    expect(cliConfig({ HEADROOM_DATA_DIR: dir, REDIS_URL: "" }).REDIS_URL).toBe(
      "redis://127.0.0.1:16379",
    );
  });

  it("uses the plain configuration when no stack runs there", () => {
    removeStackFile(dir);
    const c = cliConfig({ HEADROOM_DATA_DIR: dir });
    expect(c.REDIS_URL).toBe("redis://127.0.0.1:6379");
    expect(c.CLICKHOUSE_URL).toBeUndefined();
    expect(c.CLICKHOUSE_PATH).toBe(join(dir, "clickhouse"));
  });

  it("does not read another directory's stack.json", () => {
    writeStackFile(dir, { REDIS_URL: "redis://127.0.0.1:16379" });
    const other = mkdtempSync(join(tmpdir(), "headroom-cli-other-"));
    try {
      expect(cliConfig({ HEADROOM_DATA_DIR: other }).REDIS_URL).toBe("redis://127.0.0.1:6379");
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
