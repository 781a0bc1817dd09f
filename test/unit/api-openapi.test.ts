import { describe, expect, it } from "vitest";
import { buildApiOpenApi } from "../../src/api/openapi.js";
import { buildOpenApi } from "../../src/edge/openapi.js";

// The read API's OpenAPI document comes from the schemas that validate each route.

describe("read API OpenAPI", () => {
  const doc = buildApiOpenApi();
  const params = (path: keyof typeof doc.paths, where = "query") =>
    doc.paths[path].get.parameters
      .filter((p) => p.in === where)
      .map((p) => p.name)
      .sort();

  it("describes every route with its parameters, as the route validates them", () => {
    expect(Object.keys(doc.paths).sort()).toEqual([
      "/api/v1/advice",
      "/api/v1/alerts/events",
      "/api/v1/headroom",
      "/api/v1/reports",
      "/api/v1/spend",
      "/api/v1/usage",
    ]);
    expect(params("/api/v1/headroom")).toEqual(["app", "group", "model", "provider"]);
    expect(params("/api/v1/advice")).toEqual(
      ["app", "model", "pool", "provider", "requests", "tokens"].sort(),
    );
    expect(params("/api/v1/usage")).toEqual(
      ["app", "format", "from", "group_by", "last", "model", "provider", "to", "window"].sort(),
    );
    expect(params("/api/v1/reports")).toEqual(
      ["app", "cursor", "from", "last", "limit", "model", "provider", "to"].sort(),
    );
    expect(params("/api/v1/alerts/events")).toEqual(
      ["cursor", "from", "last", "level", "limit", "provider", "to"].sort(),
    );
    expect(params("/api/v1/spend")).toEqual(["app", "from", "last", "model", "provider", "to"]);
    // /usage and /headroom answers carry an ETag and are conditional; the others are not.
    expect(params("/api/v1/usage", "header")).toEqual(["If-None-Match"]);
    expect(params("/api/v1/headroom", "header")).toEqual(["If-None-Match"]);
    expect(params("/api/v1/reports", "header")).toEqual([]);
  });

  it("answers with the contract's error codes, 403 for a key outside its scope", () => {
    for (const [name, path] of Object.entries(doc.paths)) {
      expect(Object.keys(path.get.responses).sort()).toEqual(
        [
          ...(name === "/api/v1/usage" || name === "/api/v1/headroom" ? ["304"] : []),
          "200",
          "400",
          "401",
          "403",
          "429",
          "503",
        ].sort(),
      );
    }
    const json = JSON.stringify(doc);
    expect(json).toContain("insufficient_scope");
    expect(json).toContain("invalid_query");
  });

  it("describes the error body the read API sends, 429 fields included, as the edge does", () => {
    const limited =
      doc.paths["/api/v1/headroom"].get.responses["429"].content["application/json"].schema;
    expect(Object.keys(limited?.properties ?? {})).toEqual(
      expect.arrayContaining(["error", "message", "limit", "remaining", "reset_at", "used"]),
    );
    // One schema: the edge's document describes its errors with the same one.
    const edge = JSON.stringify(buildOpenApi());
    expect(edge).toContain(JSON.stringify(limited));
  });
});
