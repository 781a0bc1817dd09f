import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";

// npm's own range check (semver ships no types; this is the one function used).
const { satisfies, minVersion } = createRequire(import.meta.url)("semver") as {
  satisfies(version: string, range: string): boolean;
  minVersion(range: string): { version: string } | null;
};

// `npm ci` (the image's install step, and any machine's) accepts the lock only when it lists
// every optional dependency of every package, other platforms' native binaries included. npm
// drops those it cannot fetch from the lock it writes, so a lock regenerated against a registry
// that serves only this platform's binaries would break `npm ci` everywhere: this catches that.

interface LockEntry {
  version?: string;
  optional?: boolean;
  os?: string[];
  cpu?: string[];
  engines?: { node?: string };
  optionalDependencies?: Record<string, string>;
}

const lock = JSON.parse(readFileSync("package-lock.json", "utf8")) as {
  lockfileVersion: number;
  packages: Record<string, LockEntry>;
};

/** Where Node would find `name` from the package at `from` (a lock path), or undefined. */
function resolve(from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!dir) return undefined;
    const up = dir.lastIndexOf("/node_modules/");
    dir = up === -1 ? "" : dir.slice(0, up);
  }
}

describe("package-lock.json", () => {
  it("lists every optional dependency of every package, for every platform", () => {
    expect(lock.lockfileVersion).toBe(3);
    const missing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      for (const name of Object.keys(entry.optionalDependencies ?? {})) {
        if (!resolve(path, name)) missing.push(`${path || "(root)"} → ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("records each platform binary's os and cpu, so npm skips the other platforms' ones", () => {
    for (const name of [
      "@biomejs/cli-darwin-arm64",
      "@chdb/lib-darwin-arm64",
      "@chdb/lib-linux-x64-gnu",
      "@msgpackr-extract/msgpackr-extract-win32-x64",
    ]) {
      const entry = lock.packages[`node_modules/${name}`];
      expect(entry?.optional, name).toBe(true);
      expect(entry?.os?.length, name).toBe(1);
    }
  });

  // What npm ci installs on this machine: every entry but other platforms' binaries.
  const here = (list: string[] | undefined, value: string) =>
    !list || list.some((item) => (item.startsWith("!") ? item.slice(1) !== value : item === value));
  const installed = Object.entries(lock.packages).filter(
    ([, e]) => here(e.os, process.platform) && here(e.cpu, process.arch),
  );
  const refusing = (node: string) =>
    installed
      .filter(([, e]) => e.engines?.node && !satisfies(node, e.engines.node))
      .map(([path, e]) => `${path || "(root)"}@${e.version} wants node ${e.engines?.node}`);

  it("holds no package whose engines exclude the Node running it (npm ci's EBADENGINE warning)", () => {
    // CI runs this under the machine's Node and under Node 24 (.ci/run).
    expect(refusing(process.version)).toEqual([]);
  });

  it("says in engines the oldest Node that every package it installs accepts", () => {
    const range = lock.packages[""]?.engines?.node ?? "";
    const oldest = minVersion(range)?.version;
    expect(oldest, `engines.node "${range}"`).toBeDefined();
    expect(refusing(oldest ?? "")).toEqual([]);
  });
});
