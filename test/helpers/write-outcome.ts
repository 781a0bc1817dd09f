import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import type { Edge } from "../../src/edge/create-edge.js";
import { clientReport, uniqueId } from "./edge-fixture.js";
import { eventually } from "./eventually.js";
import type { Pipeline } from "./pipeline.js";
import type { CutMode, RespCutProxy } from "./resp-cut-proxy.js";

// One case of the write-outcome tests: reports sent over a Redis connection cut at one command,
// then resent as the answers advise (with their ids), and the three properties checked: a report
// answered 200 is stored once in every view; one resent as advised is stored once; `duplicate`
// is answered only for a stored report.

export type Item = { id?: string; duplicate?: boolean; error?: string; message?: string };
export type Kind = "batch with ids" | "batch without ids" | "single report";

export interface WriteOutcomeStack {
  edge: Edge;
  p: Pipeline;
  /** The proxy, between the edge and Redis, that cuts. */
  proxy: RespCutProxy;
}

export async function post(edge: Edge, key: string, kind: Kind, body: Record<string, unknown>[]) {
  const single = kind === "single report";
  const res = await edge.app.inject({
    method: "POST",
    url: single ? "/api/report" : "/api/reports",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(single ? body[0] : body),
  });
  const json = res.json();
  if (json.results) return json.results as Item[];
  // A whole request answered with one error (or a single report): each item answered so.
  return body.map(() => json as Item);
}

/** Whether an answer advises sending the report again (the same, with its id if it has one). */
export const resendAdvised = (r: Item) =>
  r.error === "unavailable" && !/may count it twice/.test(r.message ?? "");

/** Rows of each tag (app) in `reports`, `reports_v` and the two rollups. */
export async function storedPerView(p: Pipeline, project: string) {
  const views = ["reports", "reports_v", "reports_daily_v", "reports_minute_v"];
  const out = new Map<string, number[]>();
  for (const [v, view] of views.entries()) {
    const agg = view.startsWith("reports_") && view !== "reports_v" ? "sum(reports)" : "count()";
    const rs = await p.client.query({
      query: `SELECT app, ${agg} FROM ${p.db}.${view} WHERE project_id = {p:String} GROUP BY app`,
      query_params: { p: project },
      format: "JSONCompactEachRow",
    });
    for (const [app, n] of await rs.json<[string, string]>()) {
      const counts = out.get(app) ?? [0, 0, 0, 0];
      counts[v] = Number(n);
      out.set(app, counts);
    }
  }
  return out;
}

/** The write path's commands (scripts) for this project: ids, limits, the job, its settling. */
export const matchProject = (project: string) => (args: string[]) =>
  /^eval/i.test(args[0] ?? "") && args.some((a) => a.includes(project));

/**
 * One case: `n` reports of `kind`, the first send cut at the `nth` command that `match` (made
 * for the case's project) picks out; then resends as advised. Returns what was cut, or null when
 * the send had fewer such commands, with the first answers and the last (after the resends).
 */
/**
 * Until the edge says it is ready and its own connection is made again after an earlier case's
 * cut (on a loaded machine that can take a while), so a case starts on connections that work.
 * `/readyz` follows the backlog's last poll; the connection the key store writes on, without an
 * offline queue, fails a command at once while it is being made again.
 */
export async function untilEdgeReady(edge: Edge): Promise<void> {
  await eventually(
    async () => {
      expect(edge.redis.status).toBe("ready");
      expect((await edge.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
}

export async function runCase(
  { edge, p, proxy }: WriteOutcomeStack,
  kind: Kind,
  match: (project: string) => (args: string[]) => boolean,
  nth: number,
  mode: CutMode,
): Promise<{ cut: string | null; first: Item[]; last: Item[] }> {
  // Ready first: the key is written on the edge's own connection, which an earlier case cut.
  await untilEdgeReady(edge);
  const { key, projectId } = await edge.keyStore.create(`p-wo-${uniqueId()}`, {
    defaultPlan: "unlimited",
  });
  const n = kind === "single report" ? 1 : 3;
  const body = Array.from({ length: n }, (_, i) =>
    clientReport({
      app: `r${i}`,
      ...(kind === "batch with ids" ? { id: randomUUID() } : {}),
    }),
  );
  proxy.arm(match(projectId), nth, mode);
  const first = await post(edge, key, kind, body);
  const { cut } = proxy.disarm();
  const label = `${kind}, command ${nth} (${cut ?? "none"}), cut ${mode}`;

  // What each report was last told, and whether a `duplicate` came for one not stored.
  const last: Item[] = [...first];
  const duplicates = new Set<number>();
  const ok = new Set<number>();
  const note = (i: number, r: Item) => {
    last[i] = r;
    if (r.duplicate) duplicates.add(i);
    else if (r.id) ok.add(i);
  };
  for (const [i, r] of first.entries()) note(i, r);
  await eventually(
    async () => {
      const todo = last.flatMap((r, i) => (resendAdvised(r) ? [i] : []));
      if (todo.length === 0) return;
      const again = await post(
        edge,
        key,
        kind,
        todo.map((i) => body[i] as Record<string, unknown>),
      );
      for (const [j, i] of todo.entries()) note(i, again[j] as Item);
      expect(last.filter(resendAdvised), `${label}: still advised to resend`).toEqual([]);
    },
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  // Every report now has an id, or was told it may be stored and not to resend without one.
  const settled = await eventually(
    async () => {
      const stored = await storedPerView(p, projectId);
      for (const i of [...ok, ...duplicates]) {
        expect(stored.get(`r${i}`), `${label}: report ${i} (${JSON.stringify(last[i])})`).toEqual([
          1, 1, 1, 1,
        ]);
      }
      expect(await p.jobCounts()).toMatchObject({ wait: 0, active: 0, delayed: 0 });
      return stored;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  // After the queue drained: nothing stored twice, and nothing unanswered with an id.
  for (let i = 0; i < n; i++) {
    const counts = settled.get(`r${i}`) ?? [0, 0, 0, 0];
    expect(Math.max(...counts), `${label}: report ${i} stored at most once`).toBeLessThanOrEqual(1);
    if (kind === "batch with ids") {
      expect(last[i]?.id, `${label}: report ${i} answered with its id`).toBe(body[i]?.id);
    }
  }
  return { cut, first, last };
}

/** An answer in a word or two, for the record of a run. */
export const brief = (r: Item | undefined) =>
  r?.duplicate
    ? "duplicate"
    : r?.id
      ? "200"
      : `${r?.error}${resendAdvised(r ?? {}) ? " (resend)" : " (do not resend)"}`;
