import { type ChildProcess, execFile, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../helpers/eventually.js";

// test/docker/engine.sh shares one private dockerd between test runs (several run at once on a
// machine): the engine stops when the last process using it is done, whoever started it. Played
// here without Docker: a stand-in `dockerd` (sleep under that name), a client that answers, and a
// state directory and bridge name of the test's own.

const SCRIPT = "test/docker/engine.sh";

let dir: string;
let daemon: ChildProcess;
let users: ChildProcess[];
let env: NodeJS.ProcessEnv;

function engine(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile("bash", [SCRIPT, ...args], { env }, (err, stdout, stderr) => {
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A process that stands for one test run using the engine. */
function user(): ChildProcess {
  const child = spawn("sleep", ["600"], { stdio: "ignore" });
  users.push(child);
  return child;
}

const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "engine-users-"));
  copyFileSync("/bin/sleep", join(dir, "dockerd"));
  writeFileSync(join(dir, "docker"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
  daemon = spawn(join(dir, "dockerd"), ["600"], { stdio: "ignore" });
  writeFileSync(join(dir, "dockerd.pid"), String(daemon.pid));
  users = [];
  env = {
    ...process.env,
    // The private engine's socket: never an engine the machine may have on /var/run/docker.sock.
    DOCKER_HOST: `unix://${dir}/docker.sock`,
    HEADROOM_DOCKER_DIR: dir,
    HEADROOM_DOCKER_CLI: join(dir, "docker"),
    HEADROOM_DOCKER_BRIDGE: "hr-test-none",
  };
});

afterEach(() => {
  for (const child of [daemon, ...users]) if (alive(child)) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

describe("engine.sh: the shared private dockerd", () => {
  it("keeps running while another run uses it, and stops when the last one is done", async () => {
    const [first, second] = [user(), user()];
    for (const u of [first, second]) {
      const up = await engine("up", String(u.pid));
      expect(up.code, up.stderr).toBe(0);
      expect(up.stdout).toContain(`DOCKER_HOST=unix://${dir}/docker.sock`);
      expect(up.stdout).toContain("PRIVATE=1");
    }

    const firstDown = await engine("down", String(first.pid));
    expect(firstDown.code, firstDown.stderr).toBe(0);
    expect(firstDown.stderr).toContain("still used by 1 other");
    expect(alive(daemon)).toBe(true);

    const secondDown = await engine("down", String(second.pid));
    expect(secondDown.code, secondDown.stderr).toBe(0);
    await eventually(() => expect(alive(daemon)).toBe(false));
  });

  it("does not count a run that ended without saying so", async () => {
    const [first, gone] = [user(), user()];
    for (const u of [first, gone]) expect((await engine("up", String(u.pid))).code).toBe(0);
    gone.kill("SIGKILL");
    await eventually(() => expect(alive(gone)).toBe(false));

    const down = await engine("down", String(first.pid));
    expect(down.code, down.stderr).toBe(0);
    await eventually(() => expect(alive(daemon)).toBe(false));
    expect(existsSync(join(dir, "users", String(gone.pid)))).toBe(false);
  });
});
