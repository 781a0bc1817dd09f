import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { buildApiApp } from "../../src/api/app.js";
import { createQueryCache } from "../../src/api/query-cache.js";
import type { ReadLimit } from "../../src/api/read-limit.js";
import type { QueryParams, ReadStore } from "../../src/api/read-store.js";
import { loadConfig } from "../../src/config.js";
import type { HotSeries } from "../../src/headroom/hot-series.js";
import type { HotSnapshot, HotStore } from "../../src/headroom/hot-store.js";
import { HttpError } from "../../src/http/errors.js";
import type { LookupKey } from "../../src/keys/key-cache.js";
import { generateKey } from "../../src/keys/key-format.js";
import type { KeyLookup } from "../../src/keys/key-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { createAuthFailureLimits } from "../../src/limits/auth-failures.js";

// The read API built by buildApiApp on fakes of its injected stores, for route tests in the unit
// project: a key store of three keys (read, report, another project's read), a ClickHouse that
// answers each query from the rows a test gives it, and a read limit a test can close; with
// `shared`, an in-memory hot copy and the shared answers of /headroom and /usage (the last 24 h),
// as create-api.ts wires them.

export const READ_PROJECT = "prj_read";

export const keys = {
  read: generateKey("read"),
  report: generateKey(),
  otherProject: generateKey("read"),
};

const lookups: Record<string, KeyLookup> = {
  [keys.read]: {
    keyId: "key_r",
    projectId: READ_PROJECT,
    scope: "read",
    plan: "free",
    overrides: {},
  },
  [keys.report]: {
    keyId: "key_w",
    projectId: READ_PROJECT,
    scope: "report",
    plan: "free",
    overrides: {},
  },
  [keys.otherProject]: {
    keyId: "key_o",
    projectId: "prj_other",
    scope: "read",
    plan: "free",
    overrides: {},
  },
};

/** A query the fake store was asked, as ClickHouse would receive it. */
export interface AskedQuery {
  query: string;
  params: QueryParams;
}

export interface FakeReadApi {
  app: FastifyInstance;
  /** Every query the routes sent, in order. */
  asked: AskedQuery[];
  /** GET `url` with a key (the read key unless told). */
  get(url: string, key?: string | null): Promise<LightMyRequestResponse>;
  /** From now on, the read limit refuses every request. */
  closeReadLimit(): void;
  /** From now on, the store answers with `rows` for queries that match `pattern`. */
  answer(pattern: RegExp, rows: (params: QueryParams) => unknown[]): void;
  /** From now on, the store fails as ClickHouse unreachable does. */
  breakStore(): void;
  /** The in-memory hot copy (with `shared`): by project, its version and series, or none (lost). */
  hot: Map<string, { version: number; series: Map<string, HotSeries> }>;
}

/** The hot copy's behaviour (hot-store.ts) over a Map: every write moves a project's version. */
function fakeHotStore(copies: FakeReadApi["hot"]): HotStore {
  const merge = (project: string, series: Map<string, HotSeries>) => {
    const copy = copies.get(project) ?? { version: 0, series: new Map() };
    for (const [field, s] of series) copy.series.set(field, s);
    copies.set(project, { version: copy.version + 1, series: copy.series });
  };
  return {
    async write(updates) {
      for (const [project, series] of updates) merge(project, series);
      return 0;
    },
    // Writes go to the Map at once: nothing to read ahead.
    async prepare(updates, token) {
      return { at: Date.now(), updates, refill: false, token, keys: [], args: [] };
    },
    async refill(project, series) {
      merge(project, series);
      return 0;
    },
    async invalidate(projects) {
      for (const p of projects) copies.delete(p);
    },
    async snapshot(project, held): Promise<HotSnapshot> {
      const copy = copies.get(project);
      if (!copy) return { version: null };
      const version = String(copy.version);
      return version === held ? { version } : { version, series: new Map(copy.series) };
    },
    async read(project) {
      const copy = copies.get(project);
      return copy ? new Map(copy.series) : null;
    },
  };
}

export function fakeReadApi(
  opts: { now?: number; pageDir?: string; env?: Record<string, string>; shared?: boolean } = {},
): FakeReadApi {
  const asked: AskedQuery[] = [];
  const answers: { pattern: RegExp; rows: (params: QueryParams) => unknown[] }[] = [];
  let broken = false;
  const store: ReadStore = {
    db: "fake",
    async rows<T>(query: string, params: QueryParams): Promise<T[]> {
      asked.push({ query, params });
      if (broken) throw new HttpError("unavailable", "the store cannot answer right now");
      const found = answers.findLast((a) => a.pattern.test(query));
      return (found ? found.rows(params) : []) as T[];
    },
  };
  const lookupKey: LookupKey = async (key) => lookups[key] ?? null;
  let refuse = false;
  const readLimit: ReadLimit = async () => {
    if (refuse) {
      throw new HttpError("rate_limited", "read limit exceeded", {
        body: { limit: 1, remaining: 0, reset_at: new Date(0).toISOString() },
      });
    }
  };
  const config = loadConfig(opts.env ?? {});
  const hot: FakeReadApi["hot"] = new Map();
  const app = buildApiApp({
    config,
    logger: createLogger("silent", "test"),
    lookupKey,
    authLimits: createAuthFailureLimits({ points: 1_000, windowS: 60 }),
    readLimit,
    store,
    rulesFor: async () => [],
    pageDir: opts.pageDir,
    ...(opts.shared
      ? {
          hot: fakeHotStore(hot),
          headroomAnswers: createQueryCache({ ttlMs: 60_000 }),
          answers: createQueryCache({ ttlMs: 60_000 }),
        }
      : {}),
    now: opts.now === undefined ? undefined : () => opts.now as number,
  });
  return {
    app,
    asked,
    get: (url, key = keys.read) =>
      app.inject({
        method: "GET",
        url,
        headers: key === null ? {} : { authorization: `Bearer ${key}` },
      }),
    closeReadLimit: () => {
      refuse = true;
    },
    answer: (pattern, rows) => {
      answers.push({ pattern, rows });
    },
    breakStore: () => {
      broken = true;
    },
    hot,
  };
}
