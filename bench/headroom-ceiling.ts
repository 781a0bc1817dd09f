import { writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import type { CapturedAnswer } from "./bare-server.js";
import { spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import type { LoadSpec } from "./load-spec.js";
import { measureWarm, type WarmMeasure } from "./measure-warm.js";

// /api/v1/headroom against its ceiling (issue 36): a bare Fastify route answering the same bytes
// (one answer of the API, captured with its headers), both saturated by the same client (wrk, GET
// over the read keys, the readers' Accept-Encoding) in the same run, each warmed up first. The
// ratio of their CPU per answer is what the API adds to sending an answer. `path` measures another
// GET answer the same way (issue 44's /api/v1/advice?provider=…&model=…).

export const HEADROOM_PATH = "/api/v1/headroom";

/** Headers that belong to one connection or one moment, not to the answer. */
const PER_RESPONSE = new Set([
  "date",
  "connection",
  "keep-alive",
  "content-length",
  "transfer-encoding",
]);

function capture(
  url: string,
  path: string,
  key: string,
  acceptEncoding: string,
): Promise<CapturedAnswer> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (acceptEncoding !== "") headers["accept-encoding"] = acceptEncoding;
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        if (res.statusCode !== 200) {
          reject(new Error(`${path} capture: HTTP ${res.statusCode}`));
          return;
        }
        const kept = Object.entries(res.headers).filter(
          (e): e is [string, string] => typeof e[1] === "string" && !PER_RESPONSE.has(e[0]),
        );
        resolve({
          path,
          headers: Object.fromEntries(kept),
          bodyBase64: Buffer.concat(chunks).toString("base64"),
        });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

export interface HeadroomCeiling {
  /** Bytes of the captured answer's body, as sent. */
  bytes: number;
  encoding: string;
  api: WarmMeasure;
  bare: WarmMeasure;
}

export async function measureHeadroomCeiling(
  opts: {
    apiUrl: string;
    apiPid: number;
    keys: string[];
    dir: string;
    connections: number;
    durationS: number;
    warmupS: number;
    acceptEncoding: string;
    /** The GET measured (HEADROOM_PATH unless told), and a name for its files. */
    path?: string;
    name?: string;
    /** A CPU profile of the bare server (node --cpu-prof) goes here, when given. */
    profileDir?: string;
  },
  cleanup: Cleanup,
): Promise<HeadroomCeiling> {
  const path = opts.path ?? HEADROOM_PATH;
  const name = opts.name ?? "headroom";
  const answer = await capture(opts.apiUrl, path, opts.keys[0] as string, opts.acceptEncoding);
  const answerFile = join(opts.dir, `${name}-answer.json`);
  writeFileSync(answerFile, JSON.stringify(answer));
  const keysFile = join(opts.dir, `${name}.keys`);
  writeFileSync(keysFile, `${opts.keys.join("\n")}\n`);
  const spec = (url: string): LoadSpec => ({
    urls: [url],
    bodiesFile: "GET",
    keysFile,
    connections: opts.connections,
    durationS: opts.durationS,
    mode: "saturate",
    path,
    acceptEncoding: opts.acceptEncoding,
  });
  const api = await measureWarm(spec(opts.apiUrl), opts.warmupS, { api: opts.apiPid }, cleanup);
  const server = spawnChild({
    name: `bare fastify (${name} bytes)`,
    entry: "bench/bare-server.ts",
    args: ["0", answerFile],
    nodeArgs: opts.profileDir ? ["--cpu-prof", `--cpu-prof-dir=${opts.profileDir}`] : [],
    cleanup,
  });
  try {
    const port = (await server.waitFor(/bare ready (\d+)/, 30_000))[1];
    const bare = await measureWarm(
      spec(`http://127.0.0.1:${port}`),
      opts.warmupS,
      { "bare Fastify": server.pid },
      cleanup,
    );
    return {
      bytes: Buffer.from(answer.bodyBase64, "base64").length,
      encoding: answer.headers["content-encoding"] ?? "identity",
      api,
      bare,
    };
  } finally {
    await server.stop();
  }
}
