import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

// bin/test-deps.sh, npm test's pretest: where it cannot install what the tests need, one line
// that names the command to run, and a failing exit, before vitest starts. Played with a PATH
// that holds none of the packages' commands, in check-only mode (it never installs here).

const SCRIPT = resolve("bin/test-deps.sh");

let dir: string;

function run(script: string, path: string, ...args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
    execFile("/bin/bash", [script, ...args], { env: { PATH: path } }, (err, stdout, stderr) => {
      done({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "test-deps-"));
  // The one outside command the script needs before it looks for the packages.
  mkdirSync(join(dir, "path"));
  symlinkSync("/usr/bin/dirname", join(dir, "path", "dirname"));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("bin/test-deps.sh", () => {
  it("names what is missing and the apt-get command in one line, and fails", async () => {
    const { code, stdout, stderr } = await run(SCRIPT, join(dir, "path"), "--check");
    expect(code).toBe(1);
    expect(stdout).toBe("");
    const lines = stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    const [line] = lines;
    for (const pkg of ["docker-compose", "debootstrap", "iptables", "wrk", "redis-server"]) {
      expect(line).toContain(` ${pkg}`);
    }
    expect(line).toContain("redis-tools");
    expect(line).toContain("prometheus");
    expect(line).toMatch(/apt-get update && apt-get install -y --no-install-recommends .*wrk/);
  });

  it("says to run npm ci first when node_modules is missing", async () => {
    mkdirSync(join(dir, "clone", "bin"), { recursive: true });
    copyFileSync(SCRIPT, join(dir, "clone", "bin", "test-deps.sh"));
    const { code, stderr } = await run(
      join(dir, "clone", "bin", "test-deps.sh"),
      join(dir, "path"),
    );
    expect(code).toBe(1);
    expect(stderr.trimEnd()).toBe(
      "npm test: node_modules is missing or incomplete; run 'npm ci' first",
    );
  });

  it("is what npm test runs first", () => {
    const pkg = JSON.parse(readFileSync("package.json", "utf8")) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts.pretest).toBe("bash bin/test-deps.sh");
  });
});
