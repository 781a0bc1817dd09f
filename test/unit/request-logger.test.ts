import Fastify, { LogController } from "fastify";
import { describe, expect, it } from "vitest";
import { lazyRequestLogger } from "../../src/http/request-logger.js";
import { createLogger } from "../../src/lib/logger.js";

// Each request's logger is made on its first use: what it writes is what Fastify's own child
// logger writes (the request id bound, the parent's level and redaction).

function appLogging(lines: string[]) {
  const logger = createLogger("info", "edge", { write: (line: string) => void lines.push(line) });
  const app = Fastify({
    loggerInstance: logger,
    childLoggerFactory: lazyRequestLogger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.get("/log", async (req) => {
    req.log.info({ key: "hr_secret" }, "from the handler");
    req.log.debug("below the level");
    req.log.child({ step: "nested" }).warn("from a child");
    return { level: req.log.level };
  });
  app.get("/quiet", async () => ({ ok: true }));
  return app;
}

describe("lazyRequestLogger", () => {
  it("writes the request's lines with its request id, level and redaction", async () => {
    const lines: string[] = [];
    const app = appLogging(lines);
    const res = await app.inject({ url: "/log" });
    expect(res.json()).toEqual({ level: "info" });
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged).toHaveLength(2);
    const [info, warn] = logged;
    expect(info).toMatchObject({ level: 30, msg: "from the handler", key: "[redacted]" });
    expect(warn).toMatchObject({ level: 40, msg: "from a child", step: "nested" });
    expect(info?.reqId).toEqual(expect.any(String));
    expect(warn?.reqId).toBe(info?.reqId);
    await app.close();
  });

  it("gives each request its own id, and a request that logs nothing writes nothing", async () => {
    const lines: string[] = [];
    const app = appLogging(lines);
    await app.inject({ url: "/quiet" });
    expect(lines).toHaveLength(0);
    await app.inject({ url: "/log" });
    await app.inject({ url: "/log" });
    const ids = lines.map((l) => (JSON.parse(l) as { reqId: string }).reqId);
    expect(new Set(ids).size).toBe(2);
    await app.close();
  });
});
