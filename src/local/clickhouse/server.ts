import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { mkdirSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { type Logger, pino } from "pino";
import { openEngine } from "./engine.js";
import {
  exceptionBody,
  HttpQueryError,
  httpStatusFor,
  toClickHouseException,
} from "./http-errors.js";
import {
  compress,
  contentTypeFor,
  parseMultipart,
  parseQueryRequest,
  pickEncoding,
  readBody,
  readCredentials,
} from "./http-request.js";
import { firstKeyword, splitInlineInsert } from "./sql-text.js";

// One process owns an embedded chdb data directory and answers the part of ClickHouse's HTTP
// interface that @clickhouse/client and curl use, so workers, the CLI and analysts share one
// embedded store as they would share a clickhouse-server, and tests can stop or kill "ClickHouse".
// Results are buffered whole before the response starts (as with wait_end_of_query=1), so an
// error is always a proper error response, never a truncated 200.

export interface EmbeddedClickHouseOptions {
  path: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** When set, requests must authenticate as this user; otherwise as `default` with no password. */
  user?: string;
  password?: string;
  logger?: Logger;
  /**
   * Fault injection for tests: this share of query requests fails before it runs, half with
   * ClickHouse's TOO_MANY_SIMULTANEOUS_QUERIES, half as a connection dropped without an answer.
   */
  faults?: { errorRate: number };
  /** Largest accepted request body after decompression (default 512 MiB). */
  maxBodyBytes?: number;
}

export interface EmbeddedClickHouse {
  url: string;
  port: number;
  /** Stops accepting, finishes requests in flight, closes the engine session. */
  close(): Promise<void>;
}

const digest = (s: string) => createHash("sha256").update(s).digest();
const DROPPED = Symbol("dropped");

export async function startEmbeddedClickHouse(
  opts: EmbeddedClickHouseOptions,
): Promise<EmbeddedClickHouse> {
  const logger = opts.logger ?? pino({ level: "silent" });
  const host = opts.host ?? "127.0.0.1";
  const maxBodyBytes = opts.maxBodyBytes ?? 512 * 1024 * 1024;
  const expectedUser = opts.user || "default";
  const expectedPassword = digest(opts.password ?? "");
  const displayName = hostname();
  mkdirSync(opts.path, { recursive: true });
  const engine = await openEngine(opts.path, logger);

  const authenticate = (url: URL, req: IncomingMessage) => {
    const { user, password } = readCredentials(url, req);
    if (user !== expectedUser || !timingSafeEqual(digest(password), expectedPassword)) {
      throw new HttpQueryError(
        "AUTHENTICATION_FAILED",
        `${user}: Authentication failed: password is incorrect, or there is no user with such name`,
      );
    }
  };

  const ok = (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    res.writeHead(200, {
      "Content-Type": "text/html; charset=UTF-8",
      "X-ClickHouse-Server-Display-Name": displayName,
    });
    res.end("Ok.\n");
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const method = req.method ?? "GET";
    const readOnlyMethod = method === "GET" || method === "HEAD";
    if ((url.pathname === "/ping" || url.pathname === "/replicas_status") && readOnlyMethod) {
      return ok(req, res);
    }
    const headers: Record<string, string> = { "X-ClickHouse-Server-Display-Name": displayName };
    if (url.pathname !== "/") {
      req.resume();
      res.writeHead(404, { ...headers, "Content-Type": "text/plain; charset=UTF-8" });
      res.end(`There is no handle ${url.pathname}\n\nUse / or /ping for health checks.\n`);
      return;
    }
    const q = parseQueryRequest(url, req);
    if (readOnlyMethod && q.query === undefined) return ok(req, res);
    const start = process.hrtime.bigint();
    let format = q.defaultFormat;
    try {
      authenticate(url, req);
      const queryId = q.queryId ?? randomUUID();
      Object.assign(headers, {
        "X-ClickHouse-Query-Id": queryId,
        "X-ClickHouse-Format": format,
        "X-ClickHouse-Timezone": engine.timezone,
      });
      let sql = q.query ?? "";
      let data: Buffer | undefined;
      if (readOnlyMethod) {
        req.resume();
      } else {
        const body = await readBody(req, maxBodyBytes);
        const contentType = req.headers["content-type"] ?? "";
        if (contentType.toLowerCase().startsWith("multipart/form-data")) {
          for (const [name, value] of parseMultipart(body, contentType)) {
            if (name === "query") sql = value;
            else q.params.set(name.slice(6), value);
          }
        } else if (q.query !== undefined) {
          data = body;
        } else {
          const inline =
            firstKeyword(body.subarray(0, 4096).toString("latin1")) === "INSERT"
              ? splitInlineInsert(body)
              : undefined;
          sql = inline?.sql ?? body.toString("utf8");
          data = inline?.data;
        }
      }
      if (sql.trim() === "") throw new HttpQueryError("SYNTAX_ERROR", "Empty query");
      const faults = opts.faults;
      if (faults && Math.random() < faults.errorRate) {
        if (Math.random() < 0.5) throw DROPPED;
        throw new HttpQueryError(
          "TOO_MANY_SIMULTANEOUS_QUERIES",
          "Too many simultaneous queries. Maximum: 100",
        );
      }
      const result = await engine.run({
        sql,
        data,
        database: q.database,
        defaultFormat: q.defaultFormat,
        params: q.params,
        settings: q.settings,
        readonly: readOnlyMethod,
      });
      format = result.format;
      const encoding = q.compressResponse
        ? pickEncoding(req.headers["accept-encoding"])
        : undefined;
      const body = encoding ? await compress(result.body, encoding) : result.body;
      res.writeHead(200, {
        ...headers,
        "Content-Type": contentTypeFor(format, q.settings),
        "X-ClickHouse-Format": format,
        "X-ClickHouse-Summary": JSON.stringify(result.summary),
        ...(encoding ? { "Content-Encoding": encoding } : {}),
      });
      res.end(body);
      logger.debug({ queryId, ms: elapsedMs(start) }, "query done");
    } catch (err) {
      if (err === DROPPED) {
        req.socket.destroy();
        return;
      }
      const e = toClickHouseException(err);
      const status = httpStatusFor(e.type);
      logger.debug({ code: e.code, type: e.type, status, ms: elapsedMs(start) }, "query failed");
      if (res.headersSent) {
        res.destroy();
        return;
      }
      req.resume();
      res.writeHead(status, {
        ...headers,
        "Content-Type": "text/plain; charset=UTF-8",
        "X-ClickHouse-Exception-Code": String(e.code),
        "X-ClickHouse-Summary": JSON.stringify(zeroSummary(start)),
      });
      res.end(exceptionBody(e, engine.version));
    }
  }

  const inFlight = new Set<Promise<void>>();
  let closing = false;
  const server = createServer(
    // A 1 MiB request line, like clickhouse-server's http_max_uri_size: large query_params arrays.
    { keepAliveTimeout: 10_000, maxHeaderSize: 1024 * 1024, requestTimeout: 0 },
    (req, res) => {
      if (closing) {
        req.socket.destroy();
        return;
      }
      const done: Promise<void> = handle(req, res)
        .catch((err: unknown) => {
          logger.error({ err }, "embedded ClickHouse request failed");
          res.destroy();
        })
        .finally(() => inFlight.delete(done));
      inFlight.add(done);
    },
  );
  server.on("clientError", (_err, socket) => socket.destroy());

  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(opts.port ?? 8123, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    await engine.close();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  const urlHost =
    host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    close() {
      closed ??= (async () => {
        closing = true;
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await Promise.allSettled([...inFlight]);
        server.closeAllConnections();
        await stopped;
        await engine.close();
      })();
      return closed;
    },
  };
}

function elapsedMs(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

function zeroSummary(start: bigint) {
  return {
    read_rows: "0",
    read_bytes: "0",
    written_rows: "0",
    written_bytes: "0",
    total_rows_to_read: "0",
    result_rows: "0",
    result_bytes: "0",
    elapsed_ns: String(process.hrtime.bigint() - start),
  };
}
