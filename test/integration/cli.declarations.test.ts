import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";

// `headroom limits set|list` and `headroom pools set|list` as a person runs them (bin/headroom.mjs
// in a child process), against the control plane's store: what the CLI sets, HTTP reads back,
// and the other way round; refusals are usage errors (exit 2) that say why; each change is in
// the audit log as the CLI's.

let s: ControlStack;
let admin: string;
const dir = mkdtempSync(join(tmpdir(), "headroom-cli-declarations-"));

beforeAll(async () => {
  s = await startControlStack(5);
  admin = (await s.control.createKey(s.cli, null, { scope: "admin" })).key;
}, 120_000);

afterAll(async () => {
  await s?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A project of the test's own. */
async function project() {
  const p = `cli-d-${s.tag}-${Math.random().toString(36).slice(2, 8)}`;
  await s.control.createProject(s.cli, { project: p });
  return p;
}

const BEDROCK = {
  provider: "bedrock",
  model: "anthropic.claude-3-haiku-20240307-v1:0",
  pool: null,
  dimension: "requests",
  window: "1m",
  limit: 60,
};

describe("headroom limits", () => {
  it("set takes repeated --limit flags; list prints a table, or the API's JSON; HTTP reads the same", async () => {
    const p = await project();
    const set = await s.headroom([
      "limits",
      "set",
      "--project",
      p,
      "--limit",
      "bedrock/anthropic.claude-3-haiku-20240307-v1:0:requests:1m=60",
      "--limit",
      "openai/gpt-4o#openai-prod:tokens:1m=30000",
    ]);
    expect(set.stderr).toBe("");
    expect(set.code).toBe(0);
    expect(set.stdout).toContain(`project ${p}: 2 declared limits`);

    const table = await s.headroom(["limits", "list", "--project", p]);
    expect(table.code).toBe(0);
    const lines = table.stdout.trim().split("\n");
    expect(lines[0]?.split(/\s+/)).toEqual([
      "PROVIDER",
      "MODEL",
      "POOL",
      "DIMENSION",
      "WINDOW",
      "LIMIT",
    ]);
    expect(lines[1]?.split(/\s+/)).toEqual([
      "bedrock",
      "anthropic.claude-3-haiku-20240307-v1:0",
      "every",
      "requests",
      "1m",
      "60",
    ]);
    expect(lines[2]?.split(/\s+/)).toEqual([
      "openai",
      "gpt-4o",
      "openai-prod",
      "tokens",
      "1m",
      "30000",
    ]);

    const json = await s.headroom(["limits", "list", "--project", p, "--json"]);
    const listed = JSON.parse(json.stdout);
    expect(listed).toEqual({
      limits: [
        BEDROCK,
        {
          provider: "openai",
          model: "gpt-4o",
          pool: "openai-prod",
          dimension: "tokens",
          window: "1m",
          limit: 30_000,
        },
      ],
    });
    expect((await s.call("GET", `/api/v1/projects/${p}/limits`, admin)).json()).toEqual(listed);
  });

  it("set --file takes what list --json prints (or a bare array); --none clears", async () => {
    const p = await project();
    // Set over HTTP; written to a file by the CLI; set again from the file on another project.
    await s.call("PUT", `/api/v1/projects/${p}/limits`, admin, { limits: [BEDROCK] });
    const file = join(dir, `${p}.json`);
    writeFileSync(file, (await s.headroom(["limits", "list", "--project", p, "--json"])).stdout);
    const q = await project();
    const fromFile = await s.headroom(["limits", "set", "--project", q, "--file", file, "--json"]);
    expect(fromFile.code, fromFile.stderr).toBe(0);
    expect(JSON.parse(fromFile.stdout)).toEqual({ limits: [BEDROCK] });
    const bare = join(dir, `${p}-bare.json`);
    writeFileSync(bare, JSON.stringify([{ ...BEDROCK, limit: 70 }]));
    expect((await s.headroom(["limits", "set", "--project", q, "--file", bare])).code).toBe(0);
    expect(
      (await s.call("GET", `/api/v1/projects/${q}/limits`, admin)).json().limits[0].limit,
    ).toBe(70);

    const none = await s.headroom(["limits", "set", "--project", q, "--none"]);
    expect(none.code).toBe(0);
    expect((await s.headroom(["limits", "list", "--project", q])).stdout.trim()).toBe(
      "no declared limits",
    );
  });

  it("refuses, with exit 2 and why, a bad flag, a duplicate, a project that does not exist, and no source", async () => {
    const p = await project();
    const bad = await s.headroom([
      "limits",
      "set",
      "--project",
      p,
      "--limit",
      "bedrock/m:requests:1m=-1",
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--limit");

    const dup = await s.headroom([
      "limits",
      "set",
      "--project",
      p,
      "--limit",
      "bedrock/m:requests:1m=60",
      "--limit",
      "bedrock/m:requests:1m=70",
    ]);
    expect(dup.code).toBe(2);
    expect(dup.stderr).toContain(
      "limits.1: the same provider, model, pool, dimension and window as limits.0",
    );
    expect(dup.stderr).not.toMatch(/\n\s+at .+:\d+:\d+/);

    const missing = await s.headroom(["limits", "list", "--project", `${p}-none`]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`no project ${p}-none`);

    const nothing = await s.headroom(["limits", "set", "--project", p]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain("--none");
    expect((await s.call("GET", `/api/v1/projects/${p}/limits`, admin)).json()).toEqual({
      limits: [],
    });
  });
});

describe("headroom pools", () => {
  it("set takes repeated --pool flags, list prints them; an app in two pools of a provider is refused", async () => {
    const p = await project();
    const set = await s.headroom([
      "pools",
      "set",
      "--project",
      p,
      "--pool",
      "openai:openai-prod=chat,agent",
      "--pool",
      "groq:groq-prod=chat",
    ]);
    expect(set.code, set.stderr).toBe(0);
    const table = await s.headroom(["pools", "list", "--project", p]);
    expect(
      table.stdout
        .trim()
        .split("\n")
        .map((l) => l.split(/\s+/)),
    ).toEqual([
      ["PROVIDER", "POOL", "APPS"],
      ["openai", "openai-prod", "chat,agent"],
      ["groq", "groq-prod", "chat"],
    ]);
    expect((await s.call("GET", `/api/v1/projects/${p}/pools`, admin)).json()).toEqual({
      pools: [
        { provider: "openai", label: "openai-prod", apps: ["chat", "agent"] },
        { provider: "groq", label: "groq-prod", apps: ["chat"] },
      ],
    });

    const twice = await s.headroom([
      "pools",
      "set",
      "--project",
      p,
      "--pool",
      "openai:a=chat",
      "--pool",
      "openai:b=chat",
    ]);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain("an app draws on one pool of a provider");

    // Each change the CLI made is in the audit log, as the CLI's.
    const audit = (await s.call("GET", `/api/v1/audit?project=${p}`, admin)).json().items as {
      action: string;
    }[];
    const declared = audit.filter((e) => e.action.startsWith("declared_"));
    expect(declared).toHaveLength(1);
    expect(declared[0]).toMatchObject({ action: "declared_pools.set", actor: { kind: "cli" } });
  });
});
