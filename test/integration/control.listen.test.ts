import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../../src/api/create-api.js";
import { buildApiOpenApi, buildControlOpenApi } from "../../src/api/openapi.js";
import { type Config, loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/lib/logger.js";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";

// CONTROL_LISTEN: off serves no control route; api serves them beside the read routes (and in
// the read API's OpenAPI document); a port serves them on a listener of their own and not on
// the read API's. The document's paths are the routes served.

let s: ControlStack;
let admin: string;

beforeAll(async () => {
  s = await startControlStack(14);
  admin = (await s.control.createKey(s.cli, null, { scope: "admin" })).key;
}, 120_000);

afterAll(async () => {
  await s?.close();
});

const withListen = (value: string): Config => loadConfig({ ...s.p.env, CONTROL_LISTEN: value });

/** The OpenAPI paths as Fastify routes ("/api/v1/keys/{key_id}" → "/api/v1/keys/:key_id"). */
const routesOf = (doc: { paths: Record<string, Record<string, unknown>> }) =>
  Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.keys(ops).map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`),
  );

describe("CONTROL_LISTEN", () => {
  it("off: no control route is served", async () => {
    const api = await createApi(withListen("off"), createLogger("silent", "test"), {
      clickhouse: s.p.client,
    });
    try {
      expect(api.controlApp).toBeUndefined();
      const res = await api.app.inject({
        method: "GET",
        url: "/api/v1/projects",
        headers: { authorization: `Bearer ${admin}` },
      });
      expect(res.statusCode).toBe(404);
      expect((await api.app.inject("/api/v1/openapi.json")).json()).toEqual(
        JSON.parse(JSON.stringify(buildApiOpenApi())),
      );
    } finally {
      await api.close();
    }
  });

  it("api: beside the read routes, in the same OpenAPI document, every documented route served", async () => {
    const doc = (await s.call("GET", "/api/v1/openapi.json")).json();
    expect(doc).toEqual(JSON.parse(JSON.stringify(buildApiOpenApi({ control: true }))));
    const control = routesOf(buildControlOpenApi());
    expect(control).toHaveLength(19);
    for (const route of control) {
      const [method, url] = route.split(" ") as [string, string];
      expect(s.api.app.hasRoute({ method: method as "GET", url }), route).toBe(true);
    }
    expect((await s.call("GET", "/api/v1/projects", admin)).statusCode).toBe(200);
  });

  it("a port: on a listener of its own, not on the read API's", async () => {
    const api = await createApi(withListen("0"), createLogger("silent", "test"), {
      clickhouse: s.p.client,
    });
    try {
      const headers = { authorization: `Bearer ${admin}` };
      const onRead = await api.app.inject({ method: "GET", url: "/api/v1/projects", headers });
      expect(onRead.statusCode).toBe(404);
      const own = api.controlApp;
      expect(own).toBeDefined();
      const res = await own?.inject({ method: "GET", url: "/api/v1/projects", headers });
      expect(res?.statusCode).toBe(200);
      expect((await own?.inject("/api/v1/openapi.json"))?.json()).toEqual(
        JSON.parse(JSON.stringify(buildControlOpenApi())),
      );
      // The read routes are not on it.
      const read = await own?.inject({ method: "GET", url: "/api/v1/headroom", headers });
      expect(read?.statusCode).toBe(404);
    } finally {
      await api.close();
    }
  });
});
