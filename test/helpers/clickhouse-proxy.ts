import { Agent, createServer, request as httpRequest, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

// An HTTP proxy in front of a ClickHouse server that decides, request by request, what happens
// to it: passed through, dropped before ClickHouse sees it, or — the case that tests
// at-least-once delivery — run by ClickHouse with its answer thrown away, so the client cannot
// know that its insert landed. A hook can run at that exact moment (e.g. SIGKILL the worker).

export type ProxyAction = "pass" | "drop-before" | "drop-after";

export interface ProxiedRequest {
  /** "insert" for INSERTs (the statement is in the URL), "query" for everything else. */
  kind: "insert" | "query";
  sql: string;
}

export interface ProxyDecision {
  action: ProxyAction;
  /** Runs before the connection is dropped (after ClickHouse answered, for "drop-after"). */
  beforeDrop?: () => Promise<void>;
  /** Runs before the request goes on to ClickHouse: the client has sent it, nobody has run it. */
  beforeForward?: () => Promise<void>;
  /** For "pass": runs once ClickHouse answered, before the answer goes back — ran, unacknowledged. */
  beforeAnswer?: () => Promise<void>;
}

export type ProxyPolicy = (req: ProxiedRequest) => ProxyDecision | ProxyAction;

function readAll(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => resolve(Buffer.concat(chunks)));
    stream.on("error", reject);
  });
}

export async function startClickHouseProxy(target: string, initial: ProxyPolicy = () => "pass") {
  let policy = initial;
  const counts: Record<ProxyAction, number> = { pass: 0, "drop-before": 0, "drop-after": 0 };
  const upstream = new URL(target);
  const agent = new Agent({ keepAlive: true });

  const server = createServer(async (req, res) => {
    try {
      const body = await readAll(req);
      const url = new URL(req.url ?? "/", "http://proxy");
      const inUrl = url.searchParams.get("query") ?? "";
      const sql = inUrl || body.subarray(0, 4096).toString("utf8");
      const kind = /^\s*INSERT\b/i.test(inUrl) ? "insert" : "query";
      const decided = url.pathname === "/ping" ? "pass" : policy({ kind, sql });
      const decision = typeof decided === "string" ? { action: decided } : decided;
      counts[decision.action] += 1;
      if (decision.action === "drop-before") {
        await decision.beforeDrop?.();
        req.socket.destroy();
        return;
      }
      await decision.beforeForward?.();
      const answer = await new Promise<{
        status: number;
        headers: IncomingMessage["headers"];
        body: Buffer;
      }>((resolve, reject) => {
        const up = httpRequest(
          {
            agent,
            host: upstream.hostname,
            port: upstream.port,
            method: req.method,
            path: req.url,
            headers: { ...req.headers, host: upstream.host },
          },
          async (r) => {
            try {
              resolve({ status: r.statusCode ?? 502, headers: r.headers, body: await readAll(r) });
            } catch (err) {
              reject(err);
            }
          },
        );
        up.on("error", reject);
        up.end(body);
      });
      if (decision.action === "drop-after") {
        await decision.beforeDrop?.();
        req.socket.destroy();
        return;
      }
      await decision.beforeAnswer?.();
      const headers = { ...answer.headers };
      delete headers["transfer-encoding"];
      delete headers.connection;
      headers["content-length"] = String(answer.body.length);
      res.writeHead(answer.status, headers);
      res.end(answer.body);
    } catch {
      req.socket.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    setPolicy(next: ProxyPolicy) {
      policy = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}

export type ClickHouseProxy = Awaited<ReturnType<typeof startClickHouseProxy>>;
