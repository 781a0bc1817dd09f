import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";
import { clientReport } from "../helpers/edge-fixture.js";
import { ENDPOINTS } from "../helpers/read-stack.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// The scope matrix: every kind of key against every endpoint of both planes. Only the allowed
// cells succeed; every other cell is refused, and a refused call changes nothing (the key store,
// the alert rules and the audit log, as a backup holds them, are the same before and after).

const KINDS = ["report", "read", "manage", "admin", "revoked", "other"] as const;
type Kind = (typeof KINDS)[number];

interface Call {
  plane: "edge" | "api";
  method: string;
  url: string;
  body?: unknown;
}
interface Endpoint {
  name: string;
  allowed: readonly Kind[];
  /** Makes what the call acts on (fresh for each cell: an allowed call may use it up). */
  prepare(): Promise<Call>;
}

let s: ControlStack;
let receiver: Receiver;
let project: string;
let otherProject: string;
const keys = {} as Record<Kind, string>;
let fresh = 0;

const MANAGERS = ["manage", "admin"] as const;
const ruleBody = () => ({
  metric: "requests" as const,
  warn_pct: 80,
  critical_pct: 95,
  webhook: receiver.url,
});

beforeAll(async () => {
  s = await startControlStack(9);
  receiver = await startReceiver(() => undefined);
  project = `c-${s.tag}-a`;
  otherProject = `c-${s.tag}-b`;
  const { control, cli } = s;
  await control.createProject(cli, { project, plan: "free" });
  await control.createProject(cli, { project: otherProject, plan: "free" });
  const make = async (p: string | null, scope: "report" | "read" | "manage" | "admin") =>
    (await control.createKey(cli, p, { scope })).key;
  keys.report = await make(project, "report");
  keys.read = await make(project, "read");
  keys.manage = await make(project, "manage");
  keys.admin = await make(null, "admin");
  keys.other = await make(otherProject, "manage");
  const revoked = await control.createKey(cli, project, { scope: "manage" });
  await control.revokeKey(cli, revoked.key_id);
  keys.revoked = revoked.key;
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await s?.close();
});

const freshKey = async () =>
  (await s.control.createKey(s.cli, project, { scope: "report" })).key_id;
const freshRule = async () => (await s.control.createRule(s.cli, project, ruleBody())).id;

const ENDPOINTS_OF_BOTH: Endpoint[] = [
  {
    name: "POST /api/report",
    allowed: ["report"],
    prepare: async () => ({
      plane: "edge",
      method: "POST",
      url: "/api/report",
      body: clientReport(),
    }),
  },
  {
    name: "POST /api/reports",
    allowed: ["report"],
    prepare: async () => ({
      plane: "edge",
      method: "POST",
      url: "/api/reports",
      body: [clientReport()],
    }),
  },
  ...[...ENDPOINTS, "/api/v1/metrics"].map(
    (url): Endpoint => ({
      name: `GET ${url}`,
      allowed: ["read"],
      prepare: async () => ({ plane: "api", method: "GET", url }),
    }),
  ),
  {
    name: "POST /api/v1/projects",
    allowed: ["admin"],
    prepare: async () => ({
      plane: "api",
      method: "POST",
      url: "/api/v1/projects",
      body: { project: `c-${s.tag}-new-${++fresh}`, plan: "pro" },
    }),
  },
  {
    name: "GET /api/v1/projects",
    allowed: ["manage", "admin", "other"],
    prepare: async () => ({ plane: "api", method: "GET", url: "/api/v1/projects" }),
  },
  {
    name: "GET /api/v1/projects/{project}",
    allowed: MANAGERS,
    prepare: async () => ({ plane: "api", method: "GET", url: `/api/v1/projects/${project}` }),
  },
  {
    name: "PUT /api/v1/projects/{project}/plan",
    allowed: ["admin"],
    prepare: async () => ({
      plane: "api",
      method: "PUT",
      url: `/api/v1/projects/${project}/plan`,
      body: { plan: ++fresh % 2 ? "pro" : "free" },
    }),
  },
  {
    name: "POST /api/v1/projects/{project}/keys",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "POST",
      url: `/api/v1/projects/${project}/keys`,
      body: { scope: "read" },
    }),
  },
  {
    name: "GET /api/v1/projects/{project}/keys",
    allowed: MANAGERS,
    prepare: async () => ({ plane: "api", method: "GET", url: `/api/v1/projects/${project}/keys` }),
  },
  {
    name: "POST /api/v1/keys/{key_id}/rotate",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "POST",
      url: `/api/v1/keys/${await freshKey()}/rotate`,
      body: { expires_in_s: 60 },
    }),
  },
  {
    name: "DELETE /api/v1/keys/{key_id}",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "DELETE",
      url: `/api/v1/keys/${await freshKey()}`,
    }),
  },
  {
    name: "GET /api/v1/projects/{project}/alert-rules",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "GET",
      url: `/api/v1/projects/${project}/alert-rules`,
    }),
  },
  {
    name: "POST /api/v1/projects/{project}/alert-rules",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "POST",
      url: `/api/v1/projects/${project}/alert-rules`,
      body: ruleBody(),
    }),
  },
  {
    name: "GET /api/v1/alert-rules/{rule_id}",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "GET",
      url: `/api/v1/alert-rules/${await freshRule()}`,
    }),
  },
  {
    name: "PUT /api/v1/alert-rules/{rule_id}",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "PUT",
      url: `/api/v1/alert-rules/${await freshRule()}`,
      body: { ...ruleBody(), warn_pct: 70 },
    }),
  },
  {
    name: "DELETE /api/v1/alert-rules/{rule_id}",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "DELETE",
      url: `/api/v1/alert-rules/${await freshRule()}`,
    }),
  },
  {
    name: "POST /api/v1/alert-rules/{rule_id}/test",
    allowed: MANAGERS,
    prepare: async () => ({
      plane: "api",
      method: "POST",
      url: `/api/v1/alert-rules/${await freshRule()}/test`,
    }),
  },
  ...(["limits", "pools"] as const).flatMap((what): Endpoint[] => [
    {
      name: `GET /api/v1/projects/{project}/${what}`,
      allowed: MANAGERS,
      prepare: async () => ({
        plane: "api",
        method: "GET",
        url: `/api/v1/projects/${project}/${what}`,
      }),
    },
    {
      name: `PUT /api/v1/projects/{project}/${what}`,
      allowed: MANAGERS,
      // A set other than the one there: an allowed call changes it (and a refused one must not).
      prepare: async () => ({
        plane: "api",
        method: "PUT",
        url: `/api/v1/projects/${project}/${what}`,
        body:
          what === "limits"
            ? {
                limits: [
                  {
                    provider: "bedrock",
                    model: "m",
                    dimension: "requests",
                    window: "1m",
                    limit: ++fresh,
                  },
                ],
              }
            : { pools: [{ provider: "openai", label: `p${++fresh}`, apps: ["chat"] }] },
      }),
    },
  ]),
  {
    name: "GET /api/v1/audit",
    allowed: ["manage", "admin", "other"],
    prepare: async () => ({ plane: "api", method: "GET", url: "/api/v1/audit" }),
  },
];

/** The entries of two dumps that differ, by key: what a refused call changed. */
function changed(before: string, after: string): string[] {
  const byKey = (dump: string) =>
    new Map((JSON.parse(dump) as { key: string }[]).map((e) => [e.key, JSON.stringify(e)]));
  const [a, b] = [byKey(before), byKey(after)];
  return [...new Set([...a.keys(), ...b.keys()])]
    .filter((k) => a.get(k) !== b.get(k))
    .map((k) => `${k}: ${a.get(k) ?? "(none)"} → ${b.get(k) ?? "(none)"}`);
}

const send = (c: Call, key: string) =>
  c.plane === "edge" ? s.edgeCall(c.url, key, c.body) : s.call(c.method, c.url, key, c.body);

describe("the scope matrix", () => {
  const cells = ENDPOINTS_OF_BOTH.flatMap((e) => KINDS.map((kind) => [e.name, kind, e] as const));

  it.each(cells)("%s with a %s key", async (_name, kind, endpoint) => {
    const call = await endpoint.prepare();
    const allowed = endpoint.allowed.includes(kind);
    const before = allowed ? "" : await s.dump();
    const res = await send(call, keys[kind]);
    if (allowed) {
      expect(res.statusCode, res.body).toBeLessThan(300);
      return;
    }
    expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
    const code = res.json().error;
    if (kind === "revoked") expect(code).toBe("invalid_project_key");
    else if (kind === "other") expect(["insufficient_scope", "not_found"]).toContain(code);
    else {
      expect(code).toBe("insufficient_scope");
      // The refusal names the scope that was needed.
      expect(res.json().message).toMatch(/needs an? (report|read|admin|admin or manage) key/);
    }
    expect(changed(before, await s.dump())).toEqual([]);
  });

  it("a manage key lists its own project only, and reads its own audit only", async () => {
    const projects = (await s.call("GET", "/api/v1/projects", keys.other)).json();
    expect(projects.items.map((p: { project: string }) => p.project)).toEqual([otherProject]);
    const audit = (await s.call("GET", "/api/v1/audit", keys.other)).json();
    expect(audit.items.length).toBeGreaterThan(0);
    for (const e of audit.items) expect(e.project).toBe(otherProject);
    const asked = await s.call("GET", `/api/v1/audit?project=${project}`, keys.other);
    expect(asked.statusCode).toBe(403);
  });

  it("an admin key is never made over HTTP", async () => {
    const before = await s.dump();
    const res = await s.call("POST", `/api/v1/projects/${project}/keys`, keys.admin, {
      scope: "admin",
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe("invalid_body");
    expect(await s.dump()).toBe(before);
  });
});
