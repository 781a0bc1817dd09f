import type { Config, Plan } from "../config.js";
import type { Scope } from "../keys/key-format.js";
import { createKeyStore, type KeyStore } from "../keys/key-store.js";
import { cliConfig, print, table } from "./context.js";
import { UsageError } from "./errors.js";
import { closeRedis, connectRedis } from "./redis.js";

// `headroom keys …`: project keys in Redis. Arguments are parsed and checked in program.ts.

export interface KeyOptions {
  project?: string;
  plan?: string;
  scope?: Scope;
  key?: string;
  /** A monthly quota, or none. */
  monthly?: number | "none";
  burst?: number;
  capacity?: number;
  json: boolean;
}

async function withStore<T>(
  opts: KeyOptions,
  run: (store: KeyStore, config: Config) => Promise<T>,
): Promise<T> {
  const config = cliConfig();
  // An own key: `constructor` is in every object, and no plan.
  if (opts.plan !== undefined && !Object.hasOwn(config.PLANS, opts.plan)) {
    throw new UsageError(
      `unknown plan ${opts.plan}; plans: ${Object.keys(config.PLANS).join(", ")}`,
    );
  }
  const redis = await connectRedis(config);
  try {
    return await run(createKeyStore(redis), config);
  } finally {
    await closeRedis(redis);
  }
}

export const keysCreate = (project: string, opts: KeyOptions) =>
  withStore(opts, async (store, config) => {
    const k = await store.create(project, {
      plan: opts.plan,
      defaultPlan: config.DEFAULT_PLAN,
      scope: opts.scope,
    });
    const out = {
      key: k.key,
      key_id: k.keyId,
      project: k.projectId,
      scope: k.scope,
      plan: k.plan,
      created_at: k.createdAt,
    };
    print(opts.json, out, () =>
      [
        `key:     ${k.key}`,
        `key id:  ${k.keyId}`,
        `project: ${k.projectId}`,
        `scope:   ${k.scope}`,
        `plan:    ${k.plan}`,
        "",
        "The key is shown only now: store it safely.",
      ].join("\n"),
    );
  });

export const keysImport = (project: string, key: string, opts: KeyOptions) =>
  withStore(opts, async (store, config) => {
    const k = await store.import(project, key, {
      plan: opts.plan,
      defaultPlan: config.DEFAULT_PLAN,
    });
    const out = { key_id: k.keyId, project: k.projectId, plan: k.plan, created_at: k.createdAt };
    print(
      opts.json,
      out,
      () => `imported as ${k.keyId} for project ${k.projectId} (plan ${k.plan})`,
    );
  });

export const keysList = (opts: KeyOptions) =>
  withStore(opts, async (store) => {
    const keys = await store.list(opts.project);
    const out = keys.map((k) => ({
      key_id: k.keyId,
      project: k.projectId,
      scope: k.scope,
      plan: k.plan,
      created_at: k.createdAt,
      revoked: k.revoked,
    }));
    print(opts.json, out, () =>
      table(
        ["KEY ID", "PROJECT", "SCOPE", "PLAN", "CREATED", "REVOKED"],
        keys.map((k) => [
          k.keyId,
          k.projectId,
          k.scope,
          k.plan,
          k.createdAt,
          k.revoked ? "yes" : "no",
        ]),
      ),
    );
  });

export const keysRevoke = (keyId: string, opts: KeyOptions) =>
  withStore(opts, async (store) => {
    if (!(await store.revoke(keyId))) throw new UsageError(`no key with id ${keyId}`);
    print(opts.json, { key_id: keyId, revoked: true }, () => `revoked ${keyId}`);
  });

export const keysSetPlan = (project: string, plan: string, opts: KeyOptions) =>
  withStore({ ...opts, plan }, async (store) => {
    const given: Partial<Plan> = {};
    if (opts.monthly !== undefined) given.monthly = opts.monthly === "none" ? null : opts.monthly;
    if (opts.burst !== undefined) given.burst = opts.burst;
    if (opts.capacity !== undefined) given.capacity = opts.capacity;
    const { overrides } = await store.setPlan(project, plan, given);
    print(opts.json, { project, plan, ...overrides }, () => {
      const kept = Object.entries(overrides).map(([name, v]) => `${name} ${v ?? "none"}`);
      const numbers = kept.length > 0 ? `overrides: ${kept.join(", ")}` : "no overrides";
      return `project ${project} is on plan ${plan} (${numbers})`;
    });
  });
