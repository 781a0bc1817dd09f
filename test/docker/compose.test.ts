import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { sampleBody } from "../../fixtures/sample-reports.js";
import { eventually } from "../helpers/eventually.js";
import { DOCKER_CLI, docker, type RunResult, run } from "./engine.js";
import {
  APP_IMAGE,
  buildImage,
  EMBEDDED_IMAGE,
  fetchWithin,
  mb,
  publishedAddress,
  REDIS_IMAGE,
  uniqueName,
} from "./images.js";

// docker-compose.yml as deployed, with docker-compose.test.yml swapping in the stores that can
// be had here (the embedded ClickHouse server for clickhouse/clickhouse-server, a local redis:7):
// the services come up in order, workers scale to 3, every report sent lands exactly once, and
// `down` leaves no container, network or volume behind.

const project = uniqueName("hrcompose").replaceAll("-", "");
const password = `pw-${randomUUID()}`;
const composeEnv = {
  COMPOSE_PROJECT_NAME: project,
  HEADROOM_IMAGE: APP_IMAGE,
  CLICKHOUSE_EMBEDDED_IMAGE: EMBEDDED_IMAGE,
  REDIS_IMAGE,
  // Every secret the compose file requires (the embedded server has one user: the admin).
  CLICKHOUSE_PASSWORD: password,
  CLICKHOUSE_MIGRATE_PASSWORD: `m-${password}`,
  CLICKHOUSE_WRITER_PASSWORD: `w-${password}`,
  CLICKHOUSE_READER_PASSWORD: `r-${password}`,
  REDIS_PASSWORD: `redis-${password}`,
  // Free host ports, picked by the engine: nothing on this machine is assumed free.
  REDIS_HOST_PORT: "",
  CLICKHOUSE_HOST_PORT: "",
  EDGE_HOST_PORTS: "",
};
const REPORTS = 600;

let composeCommand: string[] = [];

/** `docker compose` (v2) where the client has it, else Debian's docker-compose (v1). */
async function findCompose(): Promise<string[]> {
  try {
    await run(DOCKER_CLI, ["compose", "version"]);
    return [DOCKER_CLI, "compose"];
  } catch {
    await run("docker-compose", ["version"]).catch(() => {
      throw new Error(
        "neither `docker compose` nor docker-compose is installed (Debian: apt-get install docker-compose)",
      );
    });
    return ["docker-compose"];
  }
}

function compose(args: string[], timeoutMs = 300_000): Promise<RunResult> {
  const [file, ...pre] = composeCommand as [string, ...string[]];
  return run(
    file,
    [...pre, "-p", project, "-f", "docker-compose.yml", "-f", "docker-compose.test.yml", ...args],
    { env: composeEnv, timeoutMs },
  );
}

async function containersOf(service: string): Promise<string[]> {
  const out = await docker([
    "ps",
    "-q",
    "--filter",
    `label=com.docker.compose.project=${project}`,
    "--filter",
    `label=com.docker.compose.service=${service}`,
  ]);
  return out.split("\n").filter(Boolean);
}

async function leftovers(): Promise<string[]> {
  const label = `label=com.docker.compose.project=${project}`;
  const found = await Promise.all([
    docker(["ps", "-aq", "--filter", label]),
    docker(["network", "ls", "-q", "--filter", label]),
    docker(["volume", "ls", "-q", "--filter", label]),
  ]);
  return found.flatMap((out) => out.split("\n").filter(Boolean));
}

describe("docker compose", () => {
  let clickhouseAddress = "";
  let edgeAddress = "";
  let down = false;

  async function clickhouse(sql: string): Promise<string> {
    const res = await fetchWithin(`http://${clickhouseAddress}/?query=${encodeURIComponent(sql)}`, {
      headers: {
        authorization: `Basic ${Buffer.from(`headroom_admin:${password}`).toString("base64")}`,
      },
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`clickhouse ${res.status}: ${text}`);
    return text.trim();
  }

  beforeAll(async () => {
    expect(inject("dockerHost")).toBeTruthy();
    composeCommand = await findCompose();
    // The images the compose files name, built from the Dockerfile (cached layers when the image
    // test built them already). Compose itself is run with --no-build: the build needs BuildKit
    // secrets for this machine's npm CA, which docker-compose v1 cannot pass.
    for (const [tag, target] of [
      [APP_IMAGE, undefined],
      [EMBEDDED_IMAGE, "clickhouse-embedded"],
    ] as const) {
      const b = await buildImage(tag, target);
      console.log(`image ${tag}: ${mb(b.bytes)}, built in ${b.seconds.toFixed(1)} s`);
    }
  });

  afterAll(async () => {
    if (!down) {
      const logs = await compose(["logs", "--no-color", "--tail", "30"]).catch(() => undefined);
      if (logs) console.log(logs.stdout.slice(-8000));
      await compose(["down", "--volumes", "--remove-orphans", "--timeout", "60"]).catch(
        () => undefined,
      );
    }
  });

  it("up with 3 workers, every report once, stop exits 0, down leaves nothing", {
    timeout: 900_000,
  }, async () => {
    // 1. Up with 3 workers: stores healthy, schema migrated, edge and workers running.
    const started = performance.now();
    await compose(["up", "--detach", "--no-build", "--scale", "worker=3"], 600_000);
    const [clickhouseContainer] = await containersOf("clickhouse");
    const [edgeContainer] = await containersOf("edge");
    expect(clickhouseContainer).toBeDefined();
    expect(edgeContainer).toBeDefined();
    clickhouseAddress = await publishedAddress(clickhouseContainer as string, 8123);
    edgeAddress = await publishedAddress(edgeContainer as string, 3000);
    await eventually(
      async () => {
        const res = await fetchWithin(`http://${edgeAddress}/readyz`);
        expect(res.status).toBe(200);
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(await containersOf("worker")).toHaveLength(3);
    const migrate = await docker([
      "ps",
      "-aq",
      "--filter",
      `label=com.docker.compose.project=${project}`,
      "--filter",
      "label=com.docker.compose.service=migrate",
    ]);
    expect(await docker(["inspect", "--format", "{{.State.ExitCode}}", migrate])).toBe("0");
    expect(await clickhouse("EXISTS TABLE headroom.reports")).toBe("1");
    console.log(
      `compose up (3 workers): ready in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );

    // 2. Every report sent to the edge lands exactly once, across 3 workers.
    const projectId = `compose-${randomUUID().slice(0, 8)}`;
    const created = await compose([
      "exec",
      "-T",
      "edge",
      "node",
      "dist/src/main/cli.js",
      "keys",
      "create",
      "--project",
      projectId,
      "--json",
    ]);
    const { key } = JSON.parse(created.stdout) as { key: string };

    const ids: string[] = [];
    const send = async (i: number) => {
      const res = await fetchWithin(`http://${edgeAddress}/api/report`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(sampleBody(i)),
      });
      expect(res.status, await res.clone().text()).toBe(200);
      ids.push(((await res.json()) as { id: string }).id);
    };
    const lanes = 20;
    await Promise.all(
      Array.from({ length: lanes }, async (_, lane) => {
        for (let i = lane; i < REPORTS; i += lanes) await send(i);
      }),
    );
    expect(new Set(ids).size).toBe(REPORTS);

    const where = `project_id = '${projectId}'`;
    await eventually(
      async () =>
        expect(
          Number(await clickhouse(`SELECT count() FROM headroom.reports WHERE ${where}`)),
        ).toBe(REPORTS),
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    // Once each: the raw table, read without FINAL, holds each id exactly once, and only those.
    const rows = await clickhouse(
      `SELECT toString(report_id) AS id, count() AS n FROM headroom.reports WHERE ${where} GROUP BY id FORMAT TSV`,
    );
    const counts = new Map(
      rows.split("\n").map((line) => {
        const [id, n] = line.split("\t");
        return [id as string, Number(n)];
      }),
    );
    expect(counts.size).toBe(REPORTS);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    // Still 3 workers, none restarted.
    const workers = await containersOf("worker");
    expect(workers).toHaveLength(3);
    for (const w of workers) {
      expect(await docker(["inspect", "--format", "{{.RestartCount}}", w])).toBe("0");
    }

    // 3. `stop` ends every service with exit code 0 (SIGTERM: flush, close, exit).
    await compose(["stop", "--timeout", "60"]);
    const all = (
      await docker(["ps", "-aq", "--filter", `label=com.docker.compose.project=${project}`])
    )
      .split("\n")
      .filter(Boolean);
    expect(all.length).toBe(8); // redis, clickhouse, migrate, edge, 3 workers, alerts
    const states = await docker([
      "inspect",
      "--format",
      '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} {{.State.ExitCode}}',
      ...all,
    ]);
    for (const line of states.split("\n")) expect(line).toMatch(/ exited 0$/);

    // 4. `down --volumes` leaves nothing behind.
    await compose(["down", "--volumes", "--remove-orphans", "--timeout", "60"]);
    down = true;
    expect(await leftovers()).toEqual([]);
  });
});
