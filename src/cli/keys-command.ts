import { parseArgs } from "node:util";
import { createKeyStore } from "../keys/key-store.js";
import { createWorkerRedis } from "../redis/connections.js";
import { cliConfig, print, table, UsageError } from "./context.js";

export const KEYS_HELP = `headroom keys create --project ID [--plan free|pro|unlimited] [--json]
headroom keys list [--project ID] [--json]
headroom keys revoke KEY_ID
headroom keys import --project ID --key KEY [--plan P] [--json]
headroom keys set-plan --project ID --plan P [--monthly N|none] [--burst N]`;

export async function keysCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      project: { type: "string" },
      plan: { type: "string" },
      key: { type: "string" },
      monthly: { type: "string" },
      burst: { type: "string" },
      json: { type: "boolean", default: false },
    },
  });
  const config = cliConfig();
  const plan = values.plan;
  if (plan !== undefined && !(plan in config.PLANS)) {
    throw new UsageError(`unknown plan ${plan}; plans: ${Object.keys(config.PLANS).join(", ")}`);
  }
  const redis = createWorkerRedis(config.REDIS_URL);
  const store = createKeyStore(redis);
  const need = (v: string | undefined, name: string) => {
    if (!v) throw new UsageError(`--${name} is required\n\n${KEYS_HELP}`);
    return v;
  };
  try {
    switch (sub) {
      case "create": {
        const k = await store.create(need(values.project, "project"), {
          plan,
          defaultPlan: config.DEFAULT_PLAN,
        });
        const out = {
          key: k.key,
          key_id: k.keyId,
          project: k.projectId,
          plan: k.plan,
          created_at: k.createdAt,
        };
        print(values.json, out, () =>
          [
            `key:     ${k.key}`,
            `key id:  ${k.keyId}`,
            `project: ${k.projectId}`,
            `plan:    ${k.plan}`,
            "",
            "The key is shown only now: store it safely.",
          ].join("\n"),
        );
        return;
      }
      case "import": {
        const k = await store.import(need(values.project, "project"), need(values.key, "key"), {
          plan,
          defaultPlan: config.DEFAULT_PLAN,
        });
        const out = {
          key_id: k.keyId,
          project: k.projectId,
          plan: k.plan,
          created_at: k.createdAt,
        };
        print(
          values.json,
          out,
          () => `imported as ${k.keyId} for project ${k.projectId} (plan ${k.plan})`,
        );
        return;
      }
      case "list": {
        const keys = await store.list(values.project);
        const out = keys.map((k) => ({
          key_id: k.keyId,
          project: k.projectId,
          plan: k.plan,
          created_at: k.createdAt,
          revoked: k.revoked,
        }));
        print(values.json, out, () =>
          table(
            ["KEY ID", "PROJECT", "PLAN", "CREATED", "REVOKED"],
            keys.map((k) => [k.keyId, k.projectId, k.plan, k.createdAt, k.revoked ? "yes" : "no"]),
          ),
        );
        return;
      }
      case "revoke": {
        const keyId = need(positionals[0], "KEY_ID");
        if (!(await store.revoke(keyId))) throw new UsageError(`no key with id ${keyId}`);
        print(values.json, { key_id: keyId, revoked: true }, () => `revoked ${keyId}`);
        return;
      }
      case "set-plan": {
        const project = need(values.project, "project");
        const overrides: { monthly?: number | null; burst?: number } = {};
        if (values.monthly !== undefined)
          overrides.monthly =
            values.monthly === "none" ? null : positiveInt(values.monthly, "monthly");
        if (values.burst !== undefined) overrides.burst = positiveInt(values.burst, "burst");
        await store.setPlan(project, need(plan, "plan"), overrides);
        print(
          values.json,
          { project, plan, ...overrides },
          () => `project ${project} is on plan ${plan}`,
        );
        return;
      }
      default:
        throw new UsageError(KEYS_HELP);
    }
  } finally {
    await redis.quit().catch(() => redis.disconnect());
  }
}

function positiveInt(text: string, name: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`--${name} must be a positive integer`);
  return n;
}
