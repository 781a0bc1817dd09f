import { Writable } from "node:stream";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { jsonBody } from "../../src/edge/plugins/json-body.js";
import { errorHandler } from "../../src/http/error-handler.js";
import { HttpError } from "../../src/http/errors.js";
import { createLogger } from "../../src/lib/logger.js";
import { EnqueueError } from "../../src/queue/enqueue-error.js";

// Every error becomes one of the contract's codes and bodies. A tiny app with the real error
// handler and JSON parser, and a route that throws whatever the test hands it (app.inject only).

let app: FastifyInstance | undefined;

function build() {
  const logLines: string[] = [];
  const logs = new Writable({
    write(chunk, _, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  const logger: FastifyBaseLogger = createLogger("error", "test", logs);
  const instance = Fastify({ loggerInstance: logger });
  let toThrow: unknown = null;
  instance.register(errorHandler);
  instance.register(jsonBody, { bodyLimit: 64 });
  instance.post("/echo", async (req) => req.body ?? {});
  instance.get("/throw", async () => {
    throw toThrow;
  });
  const throwing = async (err: unknown) => {
    toThrow = err;
    return instance.inject({ method: "GET", url: "/throw" });
  };
  return { app: instance, throwing, logLines };
}

function setup() {
  const built = build();
  app = built.app;
  return built;
}

afterEach(async () => {
  await app?.close();
  app = undefined;
});

const withCode = (code: string) => Object.assign(new Error(`fastify says ${code}`), { code });
const withStatus = (statusCode: number) =>
  Object.assign(new Error(`status ${statusCode}`), { statusCode });

describe("error handler", () => {
  it("sends an HttpError as it is: status, body and headers", async () => {
    const { throwing } = setup();
    const res = await throwing(
      new HttpError("invalid_project_key", "the project key is not valid", {
        headers: { "www-authenticate": "Bearer" },
      }),
    );
    expect(res.statusCode).toBe(401);
    expect(res.headers["www-authenticate"]).toBe("Bearer");
    expect(res.json()).toEqual({
      error: "invalid_project_key",
      message: "the project key is not valid",
    });
  });

  it("maps Fastify's error codes onto the contract's", async () => {
    const { throwing } = setup();
    const cases: [string, string, number][] = [
      ["FST_ERR_CTP_BODY_TOO_LARGE", "payload_too_large", 413],
      ["FST_ERR_CTP_INVALID_MEDIA_TYPE", "unsupported_media_type", 415],
      ["FST_ERR_CTP_INVALID_TYPE", "unsupported_media_type", 415],
      ["FST_ERR_CTP_EMPTY_JSON_BODY", "invalid_json", 400],
      ["FST_ERR_CTP_INVALID_CONTENT_LENGTH", "invalid_json", 400],
      ["FST_ERR_REQ_ABORTED", "invalid_json", 400],
      ["ECONNRESET", "invalid_json", 400],
    ];
    for (const [code, error, status] of cases) {
      const res = await throwing(withCode(code));
      expect([code, res.statusCode, res.json().error]).toEqual([code, status, error]);
    }
  });

  it("maps other 408 and 400 errors by status", async () => {
    const { throwing } = setup();
    const timeout = await throwing(withStatus(408));
    expect([timeout.statusCode, timeout.json().error]).toEqual([408, "request_timeout"]);
    const bad = await throwing(withStatus(400));
    expect([bad.statusCode, bad.json().error]).toEqual([400, "invalid_json"]);
  });

  it("answers Fastify's own body-size and media-type refusals with the contract's bodies", async () => {
    const { app } = setup();
    const big = await app.inject({
      method: "POST",
      url: "/echo",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ padding: "x".repeat(100) }),
    });
    expect([big.statusCode, big.json().error]).toEqual([413, "payload_too_large"]);
    const text = await app.inject({
      method: "POST",
      url: "/echo",
      headers: { "content-type": "text/plain" },
      payload: "hello",
    });
    expect([text.statusCode, text.json().error]).toEqual([415, "unsupported_media_type"]);
  });

  it("answers an EnqueueError with 503 unavailable and Retry-After", async () => {
    const { throwing } = setup();
    const res = await throwing(
      new EnqueueError("the queue did not acknowledge the job", {
        cause: new Error("connect ECONNREFUSED 10.1.2.3:6379"),
      }),
    );
    expect(res.statusCode).toBe(503);
    expect(res.headers["retry-after"]).toBe("1");
    expect(res.json()).toEqual({
      error: "unavailable",
      message: "the queue cannot take reports right now",
    });
  });

  it("answers anything else with a 500 whose body carries no internals; the log has them", async () => {
    const { throwing, logLines } = setup();
    const bug = new TypeError("Cannot read properties of undefined (reading 'secret_column')");
    for (const thrown of [bug, withStatus(502), "a thrown string", null, undefined]) {
      const res = await throwing(thrown);
      expect([String(thrown), res.statusCode]).toEqual([String(thrown), 500]);
      expect(res.json()).toEqual({ error: "internal", message: "internal error" });
      expect(res.body).not.toMatch(/secret_column|502|string|stack/);
    }
    expect(logLines.join("")).toContain("secret_column");
  });

  it("answers an unknown route with 404 not_found, without the query string", async () => {
    const { app } = setup();
    const res = await app.inject({ method: "GET", url: "/nowhere?key=hr_secret" });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: "not_found", message: "no route for GET /nowhere" });
  });
});
