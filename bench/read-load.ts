import { Agent, request } from "node:http";
import { promisify } from "node:util";
import { brotliDecompress, gunzip, inflate } from "node:zlib";
import { type Latency, latencyOf } from "./load-spec.js";
import { answered } from "./read-answers.js";
import { type ReadTarget, targetUrl } from "./read-targets.js";

// Readers of the read API, for `durationS`, in one of two models. Closed loop: `readers` loops,
// each sending its next request when the last is answered, alternating between the endpoints and
// going round the keys. Dashboards: `readers` pages, each polling every target at its own
// interval (read-targets.ts: the page's polls), on one key each, phases spread evenly; open
// loop, so a request's latency counts from when it was due (no coordinated omission). Latency per
// endpoint, of the answers that succeeded (read-answers.ts), until the last byte of the body, as
// load generators measure a
// server (wrk, k6's http_req_duration): decompressing is the client's work, on the client's
// machine. They ask as a browser does (Accept-Encoding: gzip, deflate, br) and decompress, after
// the latency is taken, every `decodeEvery`-th answer (1: all) and each endpoint's first, which
// checks the encoding and gives the decoded size; decoding every 1.9 MB /usage answer made the
// readers the machine's largest user of CPU, taking it from the server they measure on the same 2
// cores. node:http rather than fetch, whose web streams cost several times the CPU per body.
// Run in a process of their own (read-readers.ts).

export type { ReadTarget };

export interface ReadersSpec {
  url: string;
  keys: string[];
  targets: ReadTarget[];
  readers: number;
  durationS: number;
  /** Accept-Encoding to send; "" sends none. */
  acceptEncoding: string;
  /** Decode every n-th compressed answer (and each endpoint's first); 1 decodes all. */
  decodeEvery: number;
  model: "closed" | "dashboards";
}

export interface ReadLoadResult {
  readers: number;
  model: ReadersSpec["model"];
  durationS: number;
  requests: number;
  acceptEncoding: string;
  decodeEvery: number;
  byEndpoint: Record<
    string,
    {
      /** The readers that asked it. */
      readers: number;
      requests: number;
      perSec: number;
      statuses: Record<string, number>;
      /** Of the answers that succeeded (200, or 304 to a revalidation) only. */
      latencyMs: Latency;
      /** Mean size of a 200's body as sent (compressed when it was), and as decoded (of those decoded). */
      bytes: {
        sent: number;
        decoded: number;
        decodedAnswers: number;
        encodings: Record<string, number>;
      };
    }
  >;
  /** The readers' own CPU (this process), in cores. */
  clientCores?: number;
}

const DECODE: Record<string, (b: Buffer) => Promise<Buffer>> = {
  gzip: promisify(gunzip),
  deflate: promisify(inflate),
  br: promisify(brotliDecompress),
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

interface Answer {
  status: number;
  raw: Buffer;
  encoding: string;
  etag: string | undefined;
}

function get(agent: Agent, url: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      let sent = 0;
      res.on("data", (c: Buffer) => {
        chunks.push(c);
        sent += c.length;
      });
      res.on("error", reject);
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          raw: Buffer.concat(chunks, sent),
          encoding: res.headers["content-encoding"] ?? "identity",
          etag: res.headers.etag,
        }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

export async function runReaders(spec: ReadersSpec): Promise<ReadLoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: spec.readers });
  const latencies = new Map<string, number[]>(spec.targets.map((t) => [t.name, []]));
  const statuses = new Map<string, Record<string, number>>(spec.targets.map((t) => [t.name, {}]));
  const bytes = new Map(
    spec.targets.map((t) => [
      t.name,
      { n: 0, sent: 0, decodedN: 0, decoded: 0, encodings: {} as Record<string, number> },
    ]),
  );
  const end = performance.now() + spec.durationS * 1000;
  let requests = 0;

  // Per reader and target, the last URL asked and its answer's ETag (targets that revalidate).
  const held = new Map<string, { url: string; etag: string }>();

  async function ask(target: ReadTarget, key: string, t0: number, reader: number) {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (spec.acceptEncoding !== "") headers["accept-encoding"] = spec.acceptEncoding;
    const url = `${spec.url}${targetUrl(target)}`;
    const slot = `${reader} ${target.name}`;
    const last = held.get(slot);
    if (target.revalidate && last?.url === url) headers["if-none-match"] = last.etag;
    let status = "error";
    let latency = 0;
    try {
      const res = await get(agent, url, headers);
      latency = performance.now() - t0;
      status = String(res.status);
      if (target.revalidate && res.status === 200 && res.etag)
        held.set(slot, { url, etag: res.etag });
      const b = bytes.get(target.name);
      if (b && res.status === 200) {
        b.n++;
        b.sent += res.raw.length;
        b.encodings[res.encoding] = (b.encodings[res.encoding] ?? 0) + 1;
        const decode = DECODE[res.encoding];
        if (decode === undefined) {
          b.decodedN++;
          b.decoded += res.raw.length;
        } else if (b.n === 1 || b.n % spec.decodeEvery === 0) {
          // A body that does not decode is an error, like a failed request.
          const body = await decode(res.raw);
          b.decodedN++;
          b.decoded += body.length;
        }
      }
    } catch {
      status = "error";
      latency ||= performance.now() - t0;
    }
    // A failed answer's latency is no result: counted by status only.
    if (answered(status)) latencies.get(target.name)?.push(latency);
    const s = statuses.get(target.name) as Record<string, number>;
    s[status] = (s[status] ?? 0) + 1;
    requests++;
  }

  async function reader(r: number) {
    for (let i = r; performance.now() < end; i++) {
      const target = spec.targets[i % spec.targets.length] as ReadTarget;
      await ask(target, spec.keys[(i * 7 + r) % spec.keys.length] as string, performance.now(), r);
    }
  }

  async function dashboard(d: number) {
    const key = spec.keys[d % spec.keys.length] as string;
    const start = performance.now();
    await Promise.all(
      spec.targets.map(async (target) => {
        if (d >= (target.readers ?? spec.readers)) return;
        const asked: Promise<void>[] = [];
        for (let k = 0; ; k++) {
          const due = start + (d / spec.readers) * target.everyMs + k * target.everyMs;
          if (due >= end) break;
          await sleep(due - performance.now());
          asked.push(ask(target, key, due, d));
        }
        await Promise.all(asked);
      }),
    );
  }

  const run = spec.model === "dashboards" ? dashboard : reader;
  await Promise.all(Array.from({ length: spec.readers }, (_, r) => run(r)));
  agent.destroy();

  return {
    readers: spec.readers,
    model: spec.model,
    durationS: spec.durationS,
    requests,
    acceptEncoding: spec.acceptEncoding,
    decodeEvery: spec.decodeEvery,
    byEndpoint: Object.fromEntries(
      spec.targets.map((t) => {
        const values = latencies.get(t.name) ?? [];
        const s = statuses.get(t.name) ?? {};
        const asked = Object.values(s).reduce((sum, n) => sum + n, 0);
        const b = bytes.get(t.name) ?? { n: 0, sent: 0, decodedN: 0, decoded: 0, encodings: {} };
        const mean = (v: number, n: number) => (n > 0 ? Math.round(v / n) : 0);
        return [
          t.name,
          {
            readers: Math.min(t.readers ?? spec.readers, spec.readers),
            requests: asked,
            perSec: Math.round(asked / spec.durationS),
            statuses: s,
            latencyMs: latencyOf(Float64Array.from(values)),
            bytes: {
              sent: mean(b.sent, b.n),
              decoded: mean(b.decoded, b.decodedN),
              decodedAnswers: b.decodedN,
              encodings: b.encodings,
            },
          },
        ];
      }),
    ),
  };
}
