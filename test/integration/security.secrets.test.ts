import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from "@clickhouse/client";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { type Proc, startProcess } from "../../fixtures/processes.js";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { migrate } from "../../src/clickhouse/migrations.js";
import {
  type EmbeddedClickHouseProcess,
  spawnEmbeddedClickHouse,
} from "../../src/local/clickhouse/process.js";
import { createReportsQueue, REPORT_JOB } from "../../src/queue/reports-queue.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type FaultStack, startFaultStack, taggedBody } from "../helpers/fault-stack.js";
import { freePort } from "../helpers/free-ports.js";
import { post } from "../helpers/load.js";

// Secrets in use: Redis behind a password (and behind TLS), ClickHouse behind a user and a
// password, project keys, the metrics token. Everything works end to end through the ordinary
// settings (REDIS_URL, CLICKHOUSE_USER/PASSWORD), and no secret ever shows in what the processes
// print (every line of their pino output, at trace level, request logging on), in /metrics, in
// the CLI's output or in any response.

const cleanups: (() => Promise<void> | void)[] = [];

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const cli = (env: Record<string, string>, ...args: string[]) =>
  spawnSync(process.execPath, ["bin/headroom.mjs", ...args], {
    env: { ...process.env, ...env },
    encoding: "utf8",
  });

function expectNoSecret(where: string, text: string, secrets: string[]) {
  for (const secret of secrets) {
    expect(text.includes(secret), `${where} shows a secret: ${secret}`).toBe(false);
  }
}

describe("password-protected Redis and ClickHouse", () => {
  let s: FaultStack;

  it("work end to end, and no secret reaches logs, metrics, the CLI or a response", {
    timeout: 120_000,
  }, async () => {
    const redisPassword = `redis-pw-${uniqueId()}`;
    const clickhousePassword = `ch-pw-${uniqueId()}`;
    const wrongPassword = `wrong-pw-${uniqueId()}`;
    const metricsToken = `metrics-token-${uniqueId()}${uniqueId()}`;
    s = await startFaultStack({
      redis: { password: redisPassword, appendfsync: "everysec" },
      clickhouse: { user: "headroom", password: clickhousePassword },
      env: { LOG_LEVEL: "trace", LOG_REQUESTS: "true", METRICS_TOKEN: metricsToken },
    });
    cleanups.push(() => s.close());
    expect(s.env.REDIS_URL).toContain(redisPassword);
    const [edge, worker] = await Promise.all([s.startEdge(), s.startWorker()]);
    // A worker with the wrong ClickHouse password (on a queue of its own, so that it holds no
    // job of the others) keeps failing, and keeps logging about it.
    const locked = await s.startWorker({
      CLICKHOUSE_PASSWORD: wrongPassword,
      QUEUE_NAME: "locked-out",
    });
    const lockedQueue = createReportsQueue(s.admin, {
      prefix: s.env.QUEUE_PREFIX as string,
      name: "locked-out",
    });
    lockedQueue.on("error", () => {});
    cleanups.push(() => lockedQueue.close());
    await lockedQueue.add(REPORT_JOB, { v: 1, rows: [sampleRow(0, s.project)] });
    const unknownKey = `dlm_guess${uniqueId()}${uniqueId()}`;
    const secrets = [redisPassword, clickhousePassword, wrongPassword, metricsToken, s.key];

    const answers: string[] = [];
    const ask = async (key: string | undefined, body: unknown) => {
      const res = await post(edge.url, { key, body: JSON.stringify(body) });
      answers.push(JSON.stringify(res.headers), res.body);
      return res.status;
    };
    for (let i = 0; i < 20; i++) expect(await ask(s.key, taggedBody(i))).toBe(200);
    expect(await ask(unknownKey, clientReport())).toBe(401);
    expect(await ask(`${s.key}x`, clientReport())).toBe(401);
    expect(await ask(s.key, { provider: "openai" })).toBe(400);
    await eventually(async () => expect((await s.stored()).size).toBe(20), {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    await locked.proc.waitFor(/AUTHENTICATION_FAILED|Authentication failed/, 20_000);

    // Metrics: the edge's (with the token) and the workers'.
    const edgeMetrics = await fetch(`${edge.url}/metrics`, {
      headers: { authorization: `Bearer ${metricsToken}` },
    });
    expect(edgeMetrics.status).toBe(200);
    const metricsText = [
      await edgeMetrics.text(),
      await (await fetch(`http://127.0.0.1:${worker.metricsPort}/metrics`)).text(),
      await (await fetch(`http://127.0.0.1:${locked.metricsPort}/metrics`)).text(),
    ].join("\n");
    expect(metricsText).toMatch(/headroom_http_requests_total/);

    // The CLI, with the same settings.
    const cliRuns = [
      cli(s.env, "keys", "list", "--json"),
      cli(s.env, "dlq", "list"),
      cli(s.env, "stats", "--json"),
    ];
    for (const run of cliRuns) expect(run.status, run.stderr).toBe(0);
    const created = cli(s.env, "keys", "create", "--project", `p-cli-${uniqueId()}`, "--json");
    expect(created.status, created.stderr).toBe(0);
    // A new key's plaintext is shown once, to whoever created it, and nowhere else.
    const newKey = (JSON.parse(created.stdout) as { key: string }).key;
    expect(newKey).toMatch(/^hr_/);

    // Redis goes away: the 503 and the log lines about it name no password either.
    await s.killRedis();
    await eventually(async () => expect(await ask(s.key, clientReport())).toBe(503), {
      timeoutMs: 10_000,
    });
    await edge.proc.waitFor(/redis connection error/, 10_000);
    await edge.proc.waitFor(/"level":50/, 10_000);

    const outputs = s.procs.map((p) => p.output());
    // The capture is real: request logs, the 503, the edge's redacted Redis URL.
    const edgeOutput = edge.proc.output();
    expect(edgeOutput).toMatch(/incoming request/);

    expect(edgeOutput).toMatch(/redis:\/\/:\*\*\*@127\.0\.0\.1/);
    const everything = [
      ...outputs.map((o, i) => [`process ${i} output`, o] as const),
      ["responses", answers.join("\n")] as const,
      ["metrics", metricsText] as const,
      ...cliRuns.map((r, i) => [`cli run ${i}`, r.stdout + r.stderr] as const),
      ["keys create stderr", created.stderr] as const,
    ];
    for (const [where, text] of everything) {
      expectNoSecret(where, text, [...secrets, newKey]);
      expect(text, where).not.toMatch(/bearer\s+\S/i);
    }
  });
});

// ---- TLS -----------------------------------------------------------------------------------

/** Whether this machine's redis-server was built with TLS (Debian's is). */
function redisHasTls(): boolean {
  const probe = spawnSync(
    "redis-server",
    ["--port", "0", "--tls-port", "0", "--tls-cert-file", "/nonexistent", "--daemonize", "no"],
    { encoding: "utf8", timeout: 5_000 },
  );
  const text = `${probe.stdout}${probe.stderr}`;
  return probe.status !== null && !/Bad directive|wrong number of arguments/i.test(text);
}

function hasOpenssl(): boolean {
  return spawnSync("openssl", ["version"], { stdio: "ignore" }).status === 0;
}

/** A throwaway CA and a server certificate for 127.0.0.1 signed by it. */
function makeCertificates(dir: string) {
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });
  openssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=headroom test CA",
    "-keyout",
    file("ca.key"),
    "-out",
    file("ca.pem"),
  );
  openssl(
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=127.0.0.1",
    "-keyout",
    file("server.key"),
    "-out",
    file("server.csr"),
  );
  writeFileSync(file("san.ext"), "subjectAltName=IP:127.0.0.1\n");
  openssl(
    "x509",
    "-req",
    "-days",
    "1",
    "-in",
    file("server.csr"),
    "-CA",
    file("ca.pem"),
    "-CAkey",
    file("ca.key"),
    "-CAcreateserial",
    "-extfile",
    file("san.ext"),
    "-out",
    file("server.pem"),
  );
  return { ca: file("ca.pem"), cert: file("server.pem"), key: file("server.key") };
}

/** What this machine lacks for the TLS test: it fails saying so, as a skip would hide it. */
function tlsMissing(): string | null {
  if (!hasOpenssl()) return "openssl (Debian: apt-get install -y openssl)";
  if (!redisHasTls()) return "a redis-server built with TLS (Debian's redis-server package is)";
  return null;
}

describe("Redis over TLS (rediss://)", () => {
  it("edge, worker and CLI work through a rediss:// URL; plain TCP does not", {
    timeout: 120_000,
  }, async () => {
    const missing = tlsMissing();
    if (missing) throw new Error(`the Redis TLS test needs ${missing}`);
    const dir = mkdtempSync(join(tmpdir(), "headroom-tls-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const certs = makeCertificates(dir);
    const password = `tls-pw-${uniqueId()}`;
    const port = await freePort();
    // TLS only: no plain-text port at all.
    const redis: ChildProcess = spawn(
      "redis-server",
      [
        "--port",
        "0",
        "--tls-port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--tls-cert-file",
        certs.cert,
        "--tls-key-file",
        certs.key,
        "--tls-ca-cert-file",
        certs.ca,
        "--tls-auth-clients",
        "no",
        "--requirepass",
        password,
        "--dir",
        dir,
        "--appendonly",
        "yes",
        "--save",
        "",
        "--maxmemory-policy",
        "noeviction",
        "--daemonize",
        "no",
      ],
      { stdio: "ignore" },
    );
    cleanups.push(async () => {
      redis.kill("SIGTERM");
      if (redis.exitCode === null) await new Promise((r) => redis.once("exit", r));
    });
    const ca = readFileSync(certs.ca);
    const admin = new Redis({
      host: "127.0.0.1",
      port,
      password,
      tls: { ca },
      maxRetriesPerRequest: 1,
    });
    admin.on("error", () => {});
    cleanups.push(() => admin.disconnect());
    await eventually(async () => expect(await admin.ping()).toBe("PONG"), { timeoutMs: 10_000 });

    // Without the CA the certificate is refused; without TLS the port does not speak Redis.
    const untrusted = new Redis({
      host: "127.0.0.1",
      port,
      password,
      tls: {},
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    const refusals: string[] = [];
    untrusted.on("error", (err: Error) => refusals.push(err.message));
    await expect(untrusted.connect()).rejects.toThrow();
    expect(refusals.join("\n")).toMatch(/certificate/i);
    untrusted.disconnect();
    const plain = new Redis({
      host: "127.0.0.1",
      port,
      password,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: 2_000,
    });
    plain.on("error", () => {});
    await expect(plain.connect().then(() => plain.ping())).rejects.toThrow();
    plain.disconnect();

    const chPassword = `ch-pw-${uniqueId()}`;
    const ch: EmbeddedClickHouseProcess = await spawnEmbeddedClickHouse({
      path: join(dir, "clickhouse"),
      user: "headroom",
      password: chPassword,
    });
    cleanups.push(() => ch.stop());
    const client: ClickHouseClient = createClient({
      url: ch.url,
      username: "headroom",
      password: chPassword,
      log: { level: ClickHouseLogLevel.OFF },
    });
    cleanups.push(() => client.close());
    const db = `tls_${uniqueId()}`;
    await migrate(client, { db, retentionDays: 30 });

    const env: Record<string, string> = {
      REDIS_URL: `rediss://:${password}@127.0.0.1:${port}`,
      // Node's own way to trust a private CA, for every process and every client in it.
      NODE_EXTRA_CA_CERTS: certs.ca,
      QUEUE_PREFIX: `{tls-${uniqueId()}}`,
      QUEUE_NAME: "reports",
      CLICKHOUSE_URL: ch.url,
      CLICKHOUSE_USER: "headroom",
      CLICKHOUSE_PASSWORD: chPassword,
      CLICKHOUSE_DATABASE: db,
      MIGRATE_ON_START: "false",
      WORKER_METRICS_PORT: "0",
      BATCH_MAX_WAIT_MS: "100",
      LOG_LEVEL: "trace",
    };
    const created = cli(env, "keys", "create", "--project", "p-tls", "--json");
    expect(created.status, created.stderr).toBe(0);
    const key = (JSON.parse(created.stdout) as { key: string }).key;

    const edgePort = await freePort();
    const procs: Proc[] = [
      startProcess("src/main/edge.ts", { ...env, HOST: "127.0.0.1", PORT: String(edgePort) }),
      startProcess("workers/ingest.ts", env),
    ];
    cleanups.push(async () => {
      for (const p of procs) p.signal("SIGKILL");
      await Promise.all(procs.map((p) => p.exited));
    });
    await procs[0]?.waitFor(/edge ready/);
    await procs[1]?.waitFor(/worker ready/);
    const url = `http://127.0.0.1:${edgePort}`;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await post(url, { key, body: JSON.stringify(clientReport()) });
      expect(res.status, res.body).toBe(200);
      ids.push((JSON.parse(res.body) as { id: string }).id);
    }
    await eventually(
      async () => {
        const rs = await client.query({
          query: `SELECT count() FROM ${db}.reports_v WHERE project_id = 'p-tls'`,
          format: "JSONCompactEachRow",
        });
        expect(Number((await rs.json<[string]>())[0]?.[0])).toBe(ids.length);
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    // Redis saw these clients over TLS, with the password.
    expect(
      Number(/connected_clients:(\d+)/.exec(await admin.info("clients"))?.[1]),
    ).toBeGreaterThan(2);
    for (const p of procs) {
      expectNoSecret("tls process output", p.output(), [password, chPassword, key]);
      p.signal("SIGTERM");
    }
    expect(await Promise.all(procs.map((p) => p.exited))).toStrictEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
  });
});
