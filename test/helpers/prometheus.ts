import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { eventually } from "./eventually.js";
import { freePort } from "./free-ports.js";

// A real Prometheus (Debian's package) for the exporter's tests: on a free port, with its own
// storage in a temporary directory, scraping the jobs it is given. And promtool.

const INSTALL = "apt-get install prometheus (Debian's package: prometheus and promtool 2.42)";

/** Throws one line naming what to install when a binary is missing. */
export function requireBinaries(...names: string[]) {
  const missing = names.filter(
    (n) => spawnSync("sh", ["-c", `command -v ${n}`], { stdio: "ignore" }).status !== 0,
  );
  if (missing.length > 0) throw new Error(`${missing.join(" and ")} not found: ${INSTALL}`);
}

/** `promtool check metrics` over a scrape: what it says (empty when it finds nothing). */
export function promtoolCheckMetrics(text: string): { status: number | null; output: string } {
  const r = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

export interface ScrapeJob {
  name: string;
  /** host:port */
  target: string;
  path: string;
  credentials: string;
}

export interface PromVector {
  metric: Record<string, string>;
  value: [number, string];
}

export async function startPrometheus(jobs: ScrapeJob[], scrapeIntervalS = 1) {
  const dir = mkdtempSync(join(tmpdir(), "headroom-prometheus-"));
  const port = await freePort();
  const config = {
    global: { scrape_interval: `${scrapeIntervalS}s`, scrape_timeout: `${scrapeIntervalS}s` },
    scrape_configs: jobs.map((j) => ({
      job_name: j.name,
      metrics_path: j.path,
      authorization: { type: "Bearer", credentials: j.credentials },
      static_configs: [{ targets: [j.target] }],
    })),
  };
  writeFileSync(join(dir, "prometheus.yml"), stringify(config));
  let output = "";
  const child: ChildProcess = spawn(
    "prometheus",
    [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  child.stdout?.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr?.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;

  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(killer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited:\n${output}`);
        const res = await fetch(`${url}/-/ready`);
        if (!res.ok) throw new Error(`prometheus not ready: ${res.status}`);
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  } catch (err) {
    await close();
    throw err;
  }

  return {
    url,
    output: () => output,
    /** An instant PromQL query over the HTTP API. */
    async query(promql: string): Promise<PromVector[]> {
      const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const body = (await res.json()) as {
        status: string;
        error?: string;
        data: { resultType: string; result: PromVector[] };
      };
      if (body.status !== "success") throw new Error(`${promql}: ${body.error}`);
      return body.data.result;
    },
    close,
  };
}

export type Prometheus = Awaited<ReturnType<typeof startPrometheus>>;
