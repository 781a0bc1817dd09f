import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CONFIG_KEYS, configSchema } from "../../src/config.js";

// docs/configuration.md's table is kept in sync with the config schema: same variables, and
// the same defaults where a default is a plain value.

const readme = readFileSync("docs/configuration.md", "utf8");
const section = readme.split("<!-- config:start -->")[1]?.split("<!-- config:end -->")[0] ?? "";
const rows = section
  .split("\n")
  .filter((line) => /^\| `[A-Z_]+` \|/.test(line))
  .map((line) => line.split("|").map((cell) => cell.trim()));
const documented = new Map(rows.map((r) => [r[1]?.replaceAll("`", "") ?? "", r[2] ?? ""]));
const defaults = configSchema.parse({}) as Record<string, unknown>;

describe("docs/configuration.md's table", () => {
  it("lists exactly the variables of the config schema", () => {
    expect([...documented.keys()].sort()).toEqual([...CONFIG_KEYS].sort());
  });

  it("shows each plain default as the schema has it", () => {
    for (const key of CONFIG_KEYS) {
      const value = defaults[key];
      if (typeof value === "object") continue; // PLANS: described in words and in its own table
      const cell = documented.get(key) ?? "";
      if (value === undefined || value === "") expect(cell, key).toMatch(/^\(/);
      else expect(cell, key).toBe(`\`${String(value)}\``);
    }
  });
});
