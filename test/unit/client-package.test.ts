import { readFileSync } from "node:fs";
import { expect, it } from "vitest";

// headroom/client ships with the project (docs/pools.md): an "exports" entry of package.json,
// the build's output of src/client/index.ts, with no dependency beyond fetch.

it("is exported as headroom/client, built from src/client/index.ts, importing nothing", () => {
  const pkg = JSON.parse(readFileSync("package.json", "utf8")) as {
    exports: Record<string, { types: string; default: string }>;
  };
  expect(pkg.exports["./client"]).toEqual({
    types: "./src/client/index.ts",
    default: "./dist/src/client/index.js",
  });
  const source = readFileSync("src/client/index.ts", "utf8");
  expect(source).not.toMatch(/^\s*import\s/m);
});
