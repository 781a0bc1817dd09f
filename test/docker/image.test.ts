import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { sampleBody } from "../../fixtures/sample-reports.js";
import { eventually } from "../helpers/eventually.js";
import { docker } from "./engine.js";
import {
  APP_IMAGE,
  type Build,
  buildImage,
  EMBEDDED_IMAGE,
  fetchWithin,
  healthStatus,
  mb,
  publishedAddress,
  REDIS_IMAGE,
  uniqueName,
} from "./images.js";

// The image as it ships: built from the Dockerfile, run as containers (edge, worker, migrate,
// keys create) against a Redis and the embedded ClickHouse server in containers of their own on
// one network, the way an orchestrator runs it.

const lock = JSON.parse(readFileSync("package-lock.json", "utf8")) as {
  packages: Record<string, { dev?: boolean; optional?: boolean }>;
};

const net = uniqueName("hr-image");
const names = {
  redis: `${net}-redis`,
  clickhouse: `${net}-clickhouse`,
  edge: `${net}-edge`,
  worker: `${net}-worker`,
};
const password = `pw-${Math.random().toString(36).slice(2)}`;
const env = [
  ["REDIS_URL", "redis://redis:6379"],
  ["CLICKHOUSE_URL", "http://clickhouse:8123"],
  ["CLICKHOUSE_USER", "headroom"],
  ["CLICKHOUSE_PASSWORD", password],
  ["LOG_LEVEL", "info"],
].flatMap(([k, v]) => ["--env", `${k}=${v}`]);

let build: Build;
let clickhouseAddress = "";

async function clickhouse(sql: string): Promise<string> {
  const res = await fetchWithin(`http://${clickhouseAddress}/?query=${encodeURIComponent(sql)}`, {
    headers: { authorization: `Basic ${Buffer.from(`headroom:${password}`).toString("base64")}` },
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`clickhouse ${res.status}: ${text}`);
  return text.trim();
}

/** `docker run --rm` of the image on the test network: a one-shot CLI command. */
function runOnce(args: string[]): Promise<string> {
  return docker(["run", "--rm", "--network", net, ...env, APP_IMAGE, ...args], {
    timeoutMs: 120_000,
  });
}

async function redisCli(...args: string[]): Promise<string> {
  return docker(["exec", names.redis, "redis-cli", ...args]);
}

describe("the image", () => {
  beforeAll(async () => {
    expect(inject("dockerHost")).toBeTruthy();
    build = await buildImage(APP_IMAGE);
  });

  afterAll(async () => {
    const all = Object.values(names);
    const existing = await docker([
      "ps",
      "-aq",
      ...all.flatMap((n) => ["--filter", `name=^${n}$`]),
    ]);
    if (existing) await docker(["rm", "--force", "--volumes", ...existing.split("\n")]);
    await docker(["network", "rm", net]).catch(() => undefined);
  });

  it("builds from the Dockerfile", () => {
    console.log(`image ${APP_IMAGE}: ${mb(build.bytes)}, built in ${build.seconds.toFixed(1)} s`);
    expect(build.bytes).toBeGreaterThan(0);
  });

  it("runs as a non-root user", async () => {
    expect(await docker(["image", "inspect", "--format", "{{.Config.User}}", APP_IMAGE])).toBe(
      "node",
    );
    expect(await docker(["run", "--rm", APP_IMAGE, "id", "-u"])).not.toBe("0");
  });

  it("runs Node 24, an LTS in support", async () => {
    expect(await docker(["run", "--rm", APP_IMAGE, "node", "--version"])).toMatch(
      /^v24\.\d+\.\d+$/,
    );
  });

  it("holds production dependencies only: no dev dependency, no chdb", async () => {
    const listing = await docker([
      "run",
      "--rm",
      APP_IMAGE,
      "node",
      "-e",
      `const fs=require("fs"),p=require("path");const out=[];
       const walk=(d)=>{for(const e of fs.readdirSync(d)){if(e.startsWith("."))continue;
         const f=p.join(d,e);if(e.startsWith("@")){walk(f);continue}out.push(f);
         if(fs.existsSync(p.join(f,"node_modules")))walk(p.join(f,"node_modules"))}};
       walk("node_modules");console.log(out.join("\\n"))`,
    ]);
    const installed = listing.split("\n").filter(Boolean);
    expect(installed.length).toBeGreaterThan(10);
    expect(installed.filter((path) => /(^|\/)(@chdb|chdb)(\/|$)/.test(path))).toEqual([]);
    // The compiled service runs without a TypeScript loader.
    expect(installed).not.toContain("node_modules/tsx");
    const dev = installed.filter((path) => lock.packages[path]?.dev === true);
    expect(dev).toEqual([]);
    const unknown = installed.filter((path) => !lock.packages[path]);
    expect(unknown).toEqual([]);
    // The things that must be there for the service to run.
    for (const pkg of ["fastify", "bullmq", "ioredis", "@clickhouse/client", "zod"]) {
      expect(installed, pkg).toContain(`node_modules/${pkg}`);
    }
  });

  describe("containers against Redis and ClickHouse in containers", () => {
    let key = "";
    let edgeAddress = "";

    beforeAll(async () => {
      await docker(["network", "create", "--label", "org.headroom.test=1", net]);
      await docker([
        "run",
        "--detach",
        "--name",
        names.redis,
        "--network",
        net,
        "--network-alias",
        "redis",
        REDIS_IMAGE,
        "redis-server",
        "--appendonly",
        "yes",
        "--maxmemory-policy",
        "noeviction",
      ]);
      const embedded = await buildImage(EMBEDDED_IMAGE, "clickhouse-embedded");
      console.log(
        `image ${EMBEDDED_IMAGE} (tests only): ${mb(embedded.bytes)}, built in ${embedded.seconds.toFixed(1)} s`,
      );
      await docker([
        "run",
        "--detach",
        "--name",
        names.clickhouse,
        "--network",
        net,
        "--network-alias",
        "clickhouse",
        "--env",
        "CLICKHOUSE_USER=headroom",
        "--env",
        `CLICKHOUSE_PASSWORD=${password}`,
        "--publish",
        "127.0.0.1::8123",
        EMBEDDED_IMAGE,
      ]);
      clickhouseAddress = await publishedAddress(names.clickhouse, 8123);
      await eventually(async () => expect(await clickhouse("SELECT 1")).toBe("1"), {
        timeoutMs: 90_000,
        intervalMs: 250,
      });
      await eventually(async () => expect(await redisCli("ping")).toBe("PONG"), {
        timeoutMs: 30_000,
        intervalMs: 250,
      });
    });

    it("migrate, create a key, run edge and worker: a report lands, `docker stop` flushes and exits 0", {
      timeout: 900_000,
    }, async () => {
      // 1. `headroom migrate` creates the schema, and again changes nothing.
      const first = await runOnce(["headroom", "migrate"]);
      expect(first).toContain("applied migration");
      expect(await clickhouse("EXISTS TABLE headroom.reports")).toBe("1");
      const again = await runOnce(["headroom", "migrate"]);
      expect(again).not.toContain("applied migration");

      // 2. `headroom keys create` creates a project key.
      const out = JSON.parse(
        await runOnce(["headroom", "keys", "create", "--project", "image-test", "--json"]),
      ) as { key: string; project: string };
      expect(out.project).toBe("image-test");
      expect(out.key).toMatch(/^hr_/);
      key = out.key;

      // 3. The edge and a worker run, and their HEALTHCHECKs turn healthy.
      await docker([
        "run",
        "--detach",
        "--name",
        names.edge,
        "--network",
        net,
        ...env,
        "--publish",
        "127.0.0.1::3000",
        APP_IMAGE,
      ]);
      // The worker holds what it took for up to a minute, so the report below is in its hands,
      // not in ClickHouse, when it is stopped.
      await docker([
        "run",
        "--detach",
        "--name",
        names.worker,
        "--network",
        net,
        ...env,
        "--env",
        "MIGRATE_ON_START=false",
        "--env",
        "BATCH_MAX_WAIT_MS=60000",
        APP_IMAGE,
        "node",
        "dist/workers/ingest.js",
      ]);
      edgeAddress = await publishedAddress(names.edge, 3000);
      for (const name of [names.edge, names.worker]) {
        await eventually(async () => expect(await healthStatus(name)).toBe("healthy"), {
          timeoutMs: 90_000,
          intervalMs: 500,
        });
      }

      // 4. A report sent to the edge lands; `docker stop` of the worker flushes it and exits 0.
      const res = await fetchWithin(`http://${edgeAddress}/api/report`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(sampleBody(1)),
      });
      expect(res.status).toBe(200);
      const { id } = (await res.json()) as { id: string };
      // The worker has taken the job: nothing waits in the queue, one job is active.
      await eventually(
        async () => {
          expect(await redisCli("LLEN", "{headroom}:reports:wait")).toBe("0");
          expect(Number(await redisCli("LLEN", "{headroom}:reports:active"))).toBeGreaterThan(0);
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      const landed = () =>
        clickhouse(`SELECT count() FROM headroom.reports WHERE report_id = '${id}'`);
      expect(await landed()).toBe("0");

      await docker(["stop", "--time", "30", names.worker], { timeoutMs: 60_000 });
      expect(await docker(["inspect", "--format", "{{.State.ExitCode}}", names.worker])).toBe("0");
      expect(await landed()).toBe("1");
      expect(await redisCli("LLEN", "{headroom}:reports:active")).toBe("0");

      // 5. `docker stop` of the edge exits 0.
      await docker(["stop", "--time", "30", names.edge], { timeoutMs: 60_000 });
      expect(await docker(["inspect", "--format", "{{.State.ExitCode}}", names.edge])).toBe("0");
    });
  });
});
