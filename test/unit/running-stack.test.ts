import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { describeHolder } from "../../src/local/ports-free.js";
import {
  claimDataDir,
  headroomEntry,
  portHolder,
  runningStack,
  stackPidPath,
} from "../../src/local/running-stack.js";

// Which Headroom holds a data directory or a port: what a second `npm start` says.

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const dataDir = () => {
  const d = mkdtempSync(join(tmpdir(), "running-stack-"));
  dirs.push(d);
  return d;
};

it("knows Headroom's entry points by their path, compiled or not", () => {
  expect(headroomEntry(["node", "/x/headroom/dist/src/main/stack.js"])).toBe("src/main/stack");
  expect(headroomEntry(["node", "--import", "tsx", "src/main/edge.ts"])).toBe("src/main/edge");
  expect(headroomEntry(["node", "dist/workers/ingest.js"])).toBe("workers/ingest");
  expect(headroomEntry(["node", "/r/node_modules/vitest/dist/workers/forks.js"])).toBeNull();
  expect(headroomEntry(["node", "/r/node_modules/x/src/main/edge.js"])).toBeNull();
  expect(headroomEntry(["redis-server", "*:6379"])).toBeNull();
});

it("a data directory's stack: none without a PID file, none for a PID gone or not a stack", async () => {
  const dir = dataDir();
  expect(runningStack(dir)).toBeNull();
  const gone = spawn(process.execPath, ["-e", ""]);
  await new Promise((r) => gone.once("exit", r));
  writeFileSync(stackPidPath(dir), `${gone.pid}\n`);
  expect(runningStack(dir)).toBeNull();
  // A live process that is not a stack (a PID reused after a crash).
  const other = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30_000)"]);
  try {
    writeFileSync(stackPidPath(dir), `${other.pid}\n`);
    expect(runningStack(dir)).toBeNull();
  } finally {
    other.kill("SIGKILL");
  }
  writeFileSync(stackPidPath(dir), "junk\n");
  expect(runningStack(dir)).toBeNull();
});

it("claims a data directory with this PID and gives it back, only if still its own", () => {
  const dir = dataDir();
  const release = claimDataDir(dir);
  expect(stackPidPath(dir)).toMatch(/stack\.pid$/);
  release();
  expect(() => runningStack(dir)).not.toThrow();
  const again = claimDataDir(dir);
  writeFileSync(stackPidPath(dir), "1\n"); // another stack's, since
  again();
  expect(() => writeFileSync(stackPidPath(dir), "1\n", { flag: "wx" })).toThrow(/EEXIST/);
});

it("names the program listening on a port by its PID", async () => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  try {
    const port = (server.address() as { port: number }).port;
    expect(portHolder(port)).toEqual({ pid: process.pid, headroom: null, stackPid: null });
  } finally {
    server.close();
  }
});

it("says a port is a running Headroom's, with its PIDs, and another program's otherwise", () => {
  expect(describeHolder({ pid: 12, headroom: "src/main/edge", stackPid: 10 })).toBe(
    "is held by a running Headroom (its edge, PID 12, of the stack npm start runs as PID 10); stop that Headroom (Ctrl-C in its terminal, or kill 10)",
  );
  expect(describeHolder({ pid: 12, headroom: "src/main/edge", stackPid: null })).toBe(
    "is held by a running Headroom (src/main/edge, PID 12); stop that Headroom (kill 12)",
  );
  expect(describeHolder({ pid: 7, headroom: null, stackPid: null })).toBe(
    "is in use by another program (PID 7); stop that program",
  );
  expect(describeHolder(null)).toBe("is in use by another program; stop that program");
});
