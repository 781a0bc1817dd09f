import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { eventually } from "../helpers/eventually.js";
import { freePorts } from "../helpers/free-ports.js";

// `npm start` as a person runs it, stopped as people and supervisors stop it: a signal to the
// npm process itself (not its group). Every process the stack started carries its
// HEADROOM_DATA_DIR in its environment, or runs in a directory of it (redis-server writes its
// process title over its environment), which is how the test finds orphans.

const root = join(import.meta.dirname, "../..");

interface Started {
  npm: ChildProcess;
  dataDir: string;
  /** What npm start printed (stdout and stderr): what a person reads. */
  output: () => string;
  /** The processes' JSON log lines, in the data directory. */
  log: () => string;
  exited: Promise<number | null>;
}

const started: Started[] = [];

/** Pids of live processes whose environment names `dataDir`, or that run in it. */
function processesOf(dataDir: string): number[] {
  const marker = `HEADROOM_DATA_DIR=${dataDir}\0`;
  const inside = (cwd: string) => cwd === dataDir || cwd.startsWith(`${dataDir}/`);
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (
        `${readFileSync(`/proc/${entry}/environ`, "latin1")}\0`.includes(marker) ||
        inside(readlinkSync(`/proc/${entry}/cwd`))
      ) {
        // A zombie has exited; only its parent's wait is missing.
        const state = readFileSync(`/proc/${entry}/stat`, "latin1").split(") ")[1]?.[0];
        if (state !== "Z") pids.push(Number(entry));
      }
    } catch {
      // Gone while being read, or not ours to read.
    }
  }
  return pids;
}

async function npmStart(
  extraEnv: Record<string, string> = {},
  dataDir = mkdtempSync(join(tmpdir(), "headroom-stack-")),
): Promise<Started> {
  const [port, apiPort, workerMetrics, alertsMetrics] = await freePorts(4);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HEADROOM_DATA_DIR: dataDir,
    PORT: String(port),
    API_PORT: String(apiPort),
    WORKER_METRICS_PORT: String(workerMetrics),
    ALERTS_METRICS_PORT: String(alertsMetrics),
    LOG_LEVEL: "info",
    ...extraEnv,
  };
  // Its own Redis and ClickHouse, whatever this run's environment names.
  for (const name of ["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS", "CLICKHOUSE_URL"]) {
    delete env[name];
  }
  let out = "";
  // A group of its own, as a terminal gives the command it runs: Ctrl-C is SIGINT to the group.
  const npm = spawn("npm", ["start"], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  npm.stdout?.on("data", (b: Buffer) => {
    out += b.toString();
  });
  npm.stderr?.on("data", (b: Buffer) => {
    out += b.toString();
  });
  const exited = new Promise<number | null>((resolve) => npm.once("exit", (code) => resolve(code)));
  const log = () => {
    try {
      return readFileSync(join(dataDir, "headroom.log"), "utf8");
    } catch {
      return "";
    }
  };
  const s = { npm, dataDir, output: () => out, log, exited };
  started.push(s);
  return s;
}

afterEach(async () => {
  for (const s of started.splice(0)) {
    try {
      process.kill(-(s.npm.pid as number), "SIGKILL");
    } catch {}
    for (const pid of processesOf(s.dataDir)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    rmSync(s.dataDir, { recursive: true, force: true });
  }
});

const STOPS = [
  ["SIGINT", "the npm process"],
  ["SIGTERM", "the npm process"],
  ["SIGHUP", "the npm process"],
  // Ctrl-C in a terminal: npm and the stack both get it, and npm passes its own on.
  ["SIGINT", "npm's whole process group"],
] as const;

describe("npm start stops when told", () => {
  for (const [signal, target] of STOPS) {
    it(`${signal} to ${target} stops every process it started, cleanly`, {
      timeout: 180_000,
    }, async () => {
      const s = await npmStart();
      await eventually(
        () => {
          for (const ready of ["edge", "read api", "worker", "alerts worker"]) {
            expect(s.log()).toContain(`"msg":"${ready} ready"`);
          }
        },
        { timeoutMs: 120_000, intervalMs: 200 },
      );
      // The edge, the read API, two workers, Redis and ClickHouse, and the stack itself.
      expect(processesOf(s.dataDir).length).toBeGreaterThanOrEqual(7);
      process.kill(
        target === "the npm process" ? (s.npm.pid as number) : -(s.npm.pid as number),
        signal,
      );
      await eventually(() => expect(processesOf(s.dataDir)).toEqual([]), {
        timeoutMs: 60_000,
        intervalMs: 200,
      });
      await s.exited;
      // One request to stop, handled in order: no "second signal" cut it short.
      expect(s.log()).not.toContain("second signal");
      expect(s.log()).toContain('"name":"stack","msg":"stopped"');
      expect(s.output()).toContain("Headroom stopped");
    });
  }
});

describe("npm start with a port taken", () => {
  let holder: Server | undefined;
  afterEach(() => {
    holder?.close();
    holder = undefined;
  });

  it("names the port and its setting in one line before any banner, and exits non-zero", async () => {
    const [taken] = await freePorts(1);
    holder = createServer();
    await new Promise<void>((resolve) => holder?.listen(taken, "127.0.0.1", resolve));
    const s = await npmStart({ PORT: String(taken) });
    const code = await s.exited;
    expect(code).not.toBe(0);
    // The holder is this test's own process: another program, named by its PID.
    expect(s.output()).toContain(
      `npm start: port ${taken} on 127.0.0.1 (PORT) is in use by another program (PID ${process.pid}); stop that program or move Headroom with PORT=<another port>`,
    );
    expect(s.output()).not.toContain("Headroom is starting");
    expect(s.output()).not.toContain("EADDRINUSE");
    expect(processesOf(s.dataDir)).toEqual([]);
  });
});

/** Until npm start has printed its banner's last line (every process answers): the stack's PID. */
async function bannerOf(s: Started): Promise<number> {
  await eventually(() => expect(s.output()).toMatch(/^Ctrl-C stops everything/m), {
    timeoutMs: 120_000,
    intervalMs: 50,
  });
  return Number(/^Headroom is ready \(PID (\d+)\)/m.exec(s.output())?.[1]);
}

/** The banner's curl (its `curl` line and the continued lines after it), as a person copies it. */
const printedCurl = (output: string) => {
  const lines = output.split("\n");
  const start = lines.findIndex((l) => l.startsWith("curl -sS -X POST"));
  const end = lines.findIndex((l, i) => i >= start && !l.endsWith("\\"));
  return lines.slice(start, end + 1).join("\n");
};

describe("what npm start prints", () => {
  it("the banner alone, once the edge answers: its curl pasted at once gets an id; the JSON logs go to headroom.log", {
    timeout: 180_000,
  }, async () => {
    const s = await npmStart();
    await bannerOf(s);
    // At once, as a person pastes it: no waiting, no retry.
    const answer = execFileSync("bash", ["-c", printedCurl(s.output())], { encoding: "utf8" });
    expect(answer).toMatch(/^\{"id":"[0-9a-f-]{36}"\}$/);
    expect(s.output()).toMatch(/^Headroom is ready \(PID \d+\)\.$/m);
    expect(s.output()).toContain(`Logs: ${join(s.dataDir, "headroom.log")}`);
    // Piped, the terminal gets no JSON log line: they are all in the data directory's log.
    expect(s.output()).not.toMatch(/^\{"level":/m);
    expect(s.log()).toContain('"msg":"edge ready"');
    expect(s.log()).toContain('"name":"stack","msg":"applied migration 1 reports"');
  });

  it("a second npm start on the same data directory names the running Headroom and its PID", {
    timeout: 180_000,
  }, async () => {
    const first = await npmStart();
    const pid = await bannerOf(first);
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).toContain("stack.js");
    const second = await npmStart({}, first.dataDir);
    expect(await second.exited).not.toBe(0);
    expect(second.output()).toContain(
      `npm start: Headroom is already running on ${first.dataDir} (PID ${pid})`,
    );
    expect(second.output()).not.toContain("another program");
    // The first one is untouched, and still serves.
    expect(processesOf(first.dataDir)).toContain(pid);
    expect(readFileSync(join(first.dataDir, "stack.pid"), "utf8").trim()).toBe(String(pid));
  });
});

describe("npm start after a stack killed without a word", () => {
  const isRedis = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("redis-server");
    } catch {
      return false;
    }
  };

  it("its processes stop themselves; the next start stops the redis-server it left, and keeps its data", {
    timeout: 300_000,
  }, async () => {
    const first = await npmStart();
    const stack = await bannerOf(first);
    // Every process ready, not only the edge and the API the banner waits for.
    await eventually(
      () => {
        for (const ready of ["edge", "read api", "worker", "alerts worker", "clickhouse"]) {
          expect(first.log()).toContain(`"msg":"${ready} ready"`);
        }
      },
      { timeoutMs: 120_000, intervalMs: 200 },
    );
    const [oldRedis, ...others] = processesOf(first.dataDir).sort(
      (a, b) => Number(isRedis(b)) - Number(isRedis(a)),
    );
    expect(isRedis(oldRedis as number)).toBe(true);
    // The edge, the read API, two workers and ClickHouse, beside the stack.
    const children = others.filter((pid) => pid !== stack && pid !== first.npm.pid);
    expect(children.length).toBeGreaterThanOrEqual(5);

    // SIGKILL to the stack alone: nothing of its own runs to stop what it started.
    process.kill(stack, "SIGKILL");
    await eventually(
      () => expect(children.filter((pid) => processesOf(first.dataDir).includes(pid))).toEqual([]),
      {
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    // Redis cannot watch its parent: it is still there, holding the data directory's AOF.
    expect(processesOf(first.dataDir)).toContain(oldRedis);

    const second = await npmStart({}, first.dataDir);
    await bannerOf(second);
    // One redis-server on the directory, never two on one AOF; the old one stopped, not killed
    // with its data: the key the first stack made is the one the second prints.
    const redises = processesOf(first.dataDir).filter(isRedis);
    expect(redises).toHaveLength(1);
    expect(redises).not.toContain(oldRedis);
    expect(second.output()).toContain(
      `npm start: the last Headroom on ${first.dataDir} did not stop cleanly; stopping the redis-server it left running (PID ${oldRedis}) first`,
    );
    const keyOf = (output: string) => /Bearer (hr_[A-Za-z0-9_-]+)/.exec(output)?.[1];
    expect(keyOf(second.output())).toBeDefined();
    expect(keyOf(second.output())).toBe(keyOf(first.output()));
  });

  it("a process still starting when the stack is killed exits too, rather than wait for what went with it", {
    timeout: 180_000,
  }, async () => {
    const s = await npmStart();
    const runs = (pid: number, entry: string) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(entry);
      } catch {
        return false;
      }
    };
    // The moment the ingest worker is spawned: it has not connected to anything yet.
    let stack = 0;
    await eventually(
      () => {
        const pids = processesOf(s.dataDir);
        expect(pids.some((pid) => runs(pid, "workers/ingest"))).toBe(true);
        stack = pids.find((pid) => runs(pid, "src/main/stack")) ?? 0;
        expect(stack).toBeGreaterThan(0);
      },
      { timeoutMs: 120_000, intervalMs: 10 },
    );
    process.kill(stack, "SIGKILL");
    // All but the redis-server (which the next start stops) are gone, started or not.
    await eventually(
      () =>
        expect(processesOf(s.dataDir).filter((pid) => !isRedis(pid) && pid !== s.npm.pid)).toEqual(
          [],
        ),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  });
});
