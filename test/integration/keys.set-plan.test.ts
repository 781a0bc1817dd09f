import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { clientReport, type EdgeFixture, startEdge } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";

// Moving a project between plans, through `headroom keys set-plan` (bin/headroom.mjs in a child
// process) and through the key store, as the edge then sees it: a report of the project is
// answered by the plan the operator asked for, not by overrides chosen for an earlier one.

const dir = mkdtempSync(join(tmpdir(), "headroom-set-plan-"));
let fx: EdgeFixture;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const PLACES = /^(REDIS_URL|CLICKHOUSE_|HEADROOM_DATA_DIR$|QUEUE_|PLANS$|DEFAULT_PLAN$)/;
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !PLACES.test(k)));

function headroom(...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["bin/headroom.mjs", ...args],
      {
        env: { ...baseEnv, REDIS_URL: inject("redisUrl"), HEADROOM_DATA_DIR: dir },
        timeout: 60_000,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

async function setPlan(project: string, ...args: string[]) {
  const run = await headroom("keys", "set-plan", "--project", project, ...args, "--json");
  expect(run.stderr).toBe("");
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

/** The answer to the project's next report, once the edge's key cache has seen the change. */
async function answerBecomes(key: string, status: number) {
  return eventually(
    async () => {
      const res = await fx.post(clientReport(), { key });
      expect(res.statusCode, res.body).toBe(status);
      return res;
    },
    { timeoutMs: 10_000, intervalMs: 100 },
  );
}

beforeAll(async () => {
  fx = await startEdge();
});

afterAll(async () => {
  await fx?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("keys set-plan through the CLI", () => {
  it("moving to another plan drops the overrides chosen for the old one", async () => {
    const k = await fx.createKey({ plan: "pro" });
    expect(
      await setPlan(
        k.projectId,
        "--plan",
        "pro",
        "--monthly",
        "none",
        "--capacity",
        "50000",
        "--burst",
        "50000",
      ),
    ).toEqual({
      project: k.projectId,
      plan: "pro",
      monthly: null,
      burst: 50_000,
      capacity: 50_000,
    });
    // No monthly quota: a report is taken.
    await answerBecomes(k.key, 200);

    expect(await setPlan(k.projectId, "--plan", "free")).toEqual({
      project: k.projectId,
      plan: "free",
    });
    const project = await fx.edge.keyStore.getProject(k.projectId);
    expect(project?.overrides).toEqual({});
    // The free plan's numbers: reports are taken, and, once the edge's key cache (500 ms) has
    // the new plan, a flood is held to its bucket of 50.
    await answerBecomes(k.key, 200);
    const refused = await eventually(
      async () => {
        const flood = await Promise.all(
          Array.from({ length: 120 }, () => fx.post(clientReport(), { key: k.key })),
        );
        const first = flood.find((r) => r.statusCode === 429);
        expect(first).toBeDefined();
        return first;
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    expect(refused?.json()).toMatchObject({ error: "rate_limited", limit: 10 });
  });

  it("staying on the plan keeps the overrides not given, and says which remain", async () => {
    const k = await fx.createKey({ plan: "pro" });
    await setPlan(k.projectId, "--plan", "pro", "--burst", "300");
    expect(await setPlan(k.projectId, "--plan", "pro", "--monthly", "70000")).toEqual({
      project: k.projectId,
      plan: "pro",
      monthly: 70_000,
      burst: 300,
    });
    const text = await headroom("keys", "set-plan", "--project", k.projectId, "--plan", "pro");
    expect(text.stdout).toMatch(/on plan pro \(overrides: monthly 70000, burst 300\)/);
  });

  it("refuses a plan name that is only an inherited property, and changes nothing", async () => {
    const k = await fx.createKey({ plan: "pro" });
    for (const plan of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
      const run = await headroom("keys", "set-plan", "--project", k.projectId, "--plan", plan);
      expect(run.code, plan).not.toBe(0);
      expect(run.stderr).toMatch(new RegExp(`unknown plan ${plan}`));
    }
    expect((await fx.edge.keyStore.getProject(k.projectId))?.plan).toBe("pro");
    expect((await fx.post(clientReport(), { key: k.key })).statusCode).toBe(200);
  });
});

describe("setPlan in the key store", () => {
  it("a move to another plan without a burst override leaves no quota override behind", async () => {
    const k = await fx.createKey({ plan: "pro" });
    await fx.edge.keyStore.setPlan(k.projectId, "pro", { monthly: null, capacity: 50_000 });
    const moved = await fx.edge.keyStore.setPlan(k.projectId, "free");
    expect(moved).toEqual({ projectId: k.projectId, plan: "free", overrides: {} });
    // The free plan's quota applies: the 429 of an over-quota report would name 3,000.
    const lookup = await fx.edge.keyStore.lookup(k.key);
    expect(lookup).toMatchObject({ plan: "free", overrides: {} });
  });

  it("a new plan given to `keys create` for an existing project drops its overrides too", async () => {
    const k = await fx.createKey({ plan: "pro", overrides: { monthly: null } });
    await fx.edge.keyStore.create(k.projectId, { plan: "free", defaultPlan: "unlimited" });
    expect((await fx.edge.keyStore.getProject(k.projectId))?.overrides).toEqual({});
  });

  it("refuses overrides that are not positive whole numbers", async () => {
    const k = await fx.createKey({ plan: "pro" });
    for (const overrides of [{ monthly: 0 }, { burst: -1 }, { capacity: 1.5 }]) {
      await expect(fx.edge.keyStore.setPlan(k.projectId, "free", overrides)).rejects.toThrow();
    }
    expect((await fx.edge.keyStore.getProject(k.projectId))?.plan).toBe("pro");
  });
});
