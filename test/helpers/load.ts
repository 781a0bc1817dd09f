import { Agent, request as httpRequest } from "node:http";

// Real HTTP load against a real edge listener, for the fault tests: a few concurrent loops on
// keep-alive connections, paced to a total rate, each request tagged with a sequence number and
// timed, so a test can say which answer came before, during or after a fault. Bounded: it stops
// when told, at `maxMs`, or at `maxRequests`, whichever comes first.

export interface Outcome {
  seq: number;
  /** performance.now() when the request was started and when its answer (or failure) came. */
  start: number;
  end: number;
  status?: number;
  body?: string;
  /** The report id of a 200. */
  id?: string;
  /** A connection error or a timeout: the server did not answer. */
  error?: string;
}

export interface LoadOptions {
  url: string;
  key: string;
  /** The JSON body of request `seq`. */
  body: (seq: number) => unknown;
  concurrency?: number;
  /** Total requests per second over all loops (unpaced when absent). */
  ratePerSec?: number;
  maxMs?: number;
  maxRequests?: number;
  /** A request without an answer after this long counts as a hang. */
  timeoutMs?: number;
}

export interface PostResult {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

export function post(
  url: string,
  opts: { key?: string; body: string; agent?: Agent; timeoutMs?: number; path?: string },
): Promise<PostResult> {
  const target = new URL(opts.path ?? "/api/report", url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        agent: opts.agent,
        host: target.hostname,
        port: target.port,
        method: "POST",
        path: target.pathname,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(opts.body),
          ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
        },
        timeout: opts.timeoutMs ?? 15_000,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout: no answer")));
    req.on("error", reject);
    req.end(opts.body);
  });
}

export function startLoad(opts: LoadOptions) {
  const concurrency = opts.concurrency ?? 8;
  const maxMs = opts.maxMs ?? 120_000;
  const maxRequests = opts.maxRequests ?? 1_000_000;
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const outcomes: Outcome[] = [];
  const began = performance.now();
  let stopped = false;
  let seq = 0;
  const gapMs = opts.ratePerSec ? (concurrency * 1000) / opts.ratePerSec : 0;

  const loop = async () => {
    while (!stopped && performance.now() - began < maxMs && seq < maxRequests) {
      const n = seq++;
      const start = performance.now();
      const outcome: Outcome = { seq: n, start, end: start };
      try {
        const res = await post(opts.url, {
          key: opts.key,
          body: JSON.stringify(opts.body(n)),
          agent,
          timeoutMs: opts.timeoutMs,
        });
        outcome.status = res.status;
        outcome.body = res.body;
        if (res.status === 200) outcome.id = (JSON.parse(res.body) as { id: string }).id;
      } catch (err) {
        outcome.error = (err as Error).message;
      }
      outcome.end = performance.now();
      outcomes.push(outcome);
      const wait = gapMs - (outcome.end - start);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  };
  const loops = Array.from({ length: concurrency }, loop);
  const finished = Promise.all(loops).then(() => {
    agent.destroy();
    return outcomes;
  });

  return {
    outcomes,
    ok: () => outcomes.filter((o) => o.status === 200),
    /** Resolves when the load ended by itself (maxMs, maxRequests) or was stopped. */
    finished,
    stop(): Promise<Outcome[]> {
      stopped = true;
      return finished;
    },
  };
}

export type Load = ReturnType<typeof startLoad>;
