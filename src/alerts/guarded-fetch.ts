import http from "node:http";
import https from "node:https";
import { isIP, type Socket } from "node:net";
import { Readable } from "node:stream";
import { bareHost, type DestinationPolicy, DestinationRefusedError } from "./destination-policy.js";

// A POST as `fetch` makes it, on connections whose addresses the destination policy allows.
// Node's fetch cannot be given a resolver, so this is node:http(s) with the policy's `lookup`:
// the address checked is the one connected to. A literal IP is never looked up, so it is
// checked before the request; every new socket's peer is checked again once connected.
// Redirects are never followed.

export interface GuardedInit {
  method: "POST";
  headers: Record<string, string>;
  body: string;
  /** Never followed, whatever is asked. */
  redirect?: "manual";
  signal: AbortSignal;
}

/** How a kept-alive connection closed by its receiver fails a request written on it. */
const RESET_BEFORE_READ = new Set(["ECONNRESET", "EPIPE"]);

/** Statuses whose answer has no body (the Response constructor refuses one). */
const NULL_BODY = new Set([204, 205, 304]);

export interface GuardedFetch {
  fetch: (url: string, init: GuardedInit) => Promise<Response>;
  close(): void;
}

export function createGuardedFetch(policy: DestinationPolicy): GuardedFetch {
  // Keep-alive, as fetch's pool: a receiver's connection is reused across deliveries.
  const agents = {
    "http:": new http.Agent({ keepAlive: true }),
    "https:": new https.Agent({ keepAlive: true }),
  };

  /**
   * One request. `pooled`: on the agent's kept-alive connections; else on a connection of its own
   * (the retry below).
   */
  const request = (url: string, init: GuardedInit, pooled: boolean): Promise<Response> =>
    new Promise((resolve, reject) => {
      const target = new URL(url);
      const host = bareHost(target.hostname);
      const agent = agents[target.protocol as keyof typeof agents];
      if (!agent) return reject(new DestinationRefusedError(`${target.protocol} is not http(s)`));
      const literal = isIP(host) !== 0 && policy.refusal(host, host);
      if (literal) return reject(new DestinationRefusedError(`destination refused: ${literal}`));
      const req = (target.protocol === "https:" ? https : http).request(target, {
        method: init.method,
        headers: { ...init.headers, "content-length": Buffer.byteLength(init.body) },
        agent: pooled ? agent : false,
        lookup: policy.lookup,
        signal: init.signal,
      });
      req.on("socket", (socket: Socket) => {
        const check = () => {
          const why = socket.remoteAddress && policy.refusal(host, socket.remoteAddress);
          if (why) req.destroy(new DestinationRefusedError(`destination refused: ${why}`));
        };
        if (socket.connecting) socket.once("connect", check);
        else check();
      });
      let answered = false;
      req.on("error", (err: NodeJS.ErrnoException) => {
        // A kept-alive connection the receiver closed as this request went out (its idle timeout,
        // e.g. Node's 5 s, racing our reuse): it was never read, so it goes once more on a
        // connection of its own (Node's http documentation, request.reusedSocket). Any other
        // failure is the delivery's, retried by its job.
        if (pooled && !answered && req.reusedSocket && RESET_BEFORE_READ.has(err.code ?? "")) {
          request(url, init, false).then(resolve, reject);
          return;
        }
        reject(err);
      });
      req.on("response", (res) => {
        answered = true;
        const status = res.statusCode ?? 0;
        const headers = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          for (const v of [value ?? []].flat()) headers.append(name, v);
        }
        if (status < 200 || status > 599) {
          res.resume();
          return reject(new Error(`the receiver answered an invalid status ${status}`));
        }
        if (NULL_BODY.has(status)) {
          res.resume();
          return resolve(new Response(null, { status, headers }));
        }
        resolve(new Response(Readable.toWeb(res) as ReadableStream, { status, headers }));
      });
      req.end(init.body);
    });

  const fetch = (url: string, init: GuardedInit) => request(url, init, true);

  return {
    fetch,
    close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}
