import type { Plan } from "../config.js";
import type { Scope } from "../keys/key-format.js";
import { print, table } from "./context.js";
import { withControl } from "./control.js";

// `headroom keys …`: project keys in Redis, through the control plane's functions (the HTTP
// routes call the same ones; each change is in the audit log). Arguments are parsed and checked
// in program.ts.

export interface KeyOptions {
  project?: string;
  plan?: string;
  scope?: Scope;
  key?: string;
  /** A monthly quota, or none. */
  monthly?: number | "none";
  burst?: number;
  capacity?: number;
  /** `keys rotate`: how long the old secret keeps working, in seconds. */
  expiresIn?: number;
  json: boolean;
}

export const keysCreate = (project: string | undefined, opts: KeyOptions) =>
  withControl(async (control, cli) => {
    const k = await control.createKey(cli, project ?? null, {
      scope: opts.scope ?? "report",
      plan: opts.plan,
    });
    const out = {
      key: k.key,
      key_id: k.key_id,
      project: k.project,
      scope: k.scope,
      plan: k.plan,
      created_at: k.created_at,
    };
    print(opts.json, out, () =>
      [
        `key:     ${k.key}`,
        `key id:  ${k.key_id}`,
        `project: ${k.project ?? "(none: an admin key manages every project)"}`,
        `scope:   ${k.scope}`,
        ...(k.scope === "admin" ? [] : [`plan:    ${k.plan}`]),
        "",
        "The key is shown only now: store it safely.",
      ].join("\n"),
    );
  });

export const keysImport = (project: string, key: string, opts: KeyOptions) =>
  withControl(async (control, cli) => {
    const k = await control.importKey(cli, project, key, opts.plan);
    const out = { key_id: k.keyId, project: k.projectId, plan: k.plan, created_at: k.createdAt };
    print(
      opts.json,
      out,
      () => `imported as ${k.keyId} for project ${k.projectId} (plan ${k.plan})`,
    );
  });

export const keysList = (opts: KeyOptions) =>
  withControl(async (control, cli) => {
    const keys = await control.listKeys(cli, opts.project);
    print(opts.json, keys, () =>
      table(
        ["KEY ID", "PROJECT", "SCOPE", "PLAN", "CREATED", "LAST USED", "REVOKED"],
        keys.map((k) => [
          k.key_id,
          k.project ?? "*",
          k.scope,
          k.plan || "-",
          k.created_at,
          k.last_used_at,
          k.revoked ? "yes" : "no",
        ]),
      ),
    );
  });

export const keysRevoke = (keyId: string, opts: KeyOptions) =>
  withControl(async (control, cli) => {
    const out = await control.revokeKey(cli, keyId);
    print(opts.json, out, () => `revoked ${keyId}`);
  });

export const keysRotate = (keyId: string, opts: KeyOptions) =>
  withControl(async (control, cli) => {
    const k = await control.rotateKey(cli, keyId, opts.expiresIn ?? 86_400);
    const out = {
      key: k.key,
      key_id: k.key_id,
      project: k.project,
      scope: k.scope,
      old_key_expires_at: k.old_key_expires_at,
    };
    print(opts.json, out, () =>
      [
        `key:     ${k.key}`,
        `key id:  ${k.key_id}`,
        `old key: works until ${k.old_key_expires_at}`,
        "",
        "The new key is shown only now: store it safely.",
      ].join("\n"),
    );
  });

export const keysSetPlan = (project: string, plan: string, opts: KeyOptions) =>
  withControl(async (control, cli) => {
    const given: Partial<Plan> = {};
    if (opts.monthly !== undefined) given.monthly = opts.monthly === "none" ? null : opts.monthly;
    if (opts.burst !== undefined) given.burst = opts.burst;
    if (opts.capacity !== undefined) given.capacity = opts.capacity;
    const { overrides } = await control.setPlan(cli, project, { plan, overrides: given });
    print(opts.json, { project, plan, ...overrides }, () => {
      const kept = Object.entries(overrides).map(([name, v]) => `${name} ${v ?? "none"}`);
      const numbers = kept.length > 0 ? `overrides: ${kept.join(", ")}` : "no overrides";
      return `project ${project} is on plan ${plan} (${numbers})`;
    });
  });

/** `headroom audit`: the control plane's audit log, newest first. */
export const auditList = (opts: { project?: string; limit: number; json: boolean }) =>
  withControl(async (control, cli) => {
    const rows = (await control.readAudit(cli, { project: opts.project, limit: opts.limit }))
      .slice(0, opts.limit)
      .map((r) => r.entry);
    print(opts.json, rows, () =>
      rows.length === 0
        ? "the audit log is empty"
        : table(
            ["AT", "ACTOR", "SOURCE", "ACTION", "PROJECT", "TARGET"],
            rows.map((e) => [
              e.at,
              e.actor.kind === "cli" ? `cli:${e.actor.user ?? "?"}` : `${e.actor.key_id}`,
              e.source,
              e.action,
              e.project,
              e.target,
            ]),
          ),
    );
  });
