import type { DeclarationsReader, DeclaredPool } from "../providers/declared-limit.js";
import { declaredPoolIndex, unplacedProject, withDeclaredPool } from "../report/declared-pool.js";
import type { ReportRow } from "../report/report-schema.js";

// The ingest worker's step before a job's rows are batched (and so before their manifest is
// written: a retried batch keeps the pools its first attempt gave): rows that name no account
// and no pool take the pool their project declared for their app (src/report/declared-pool.ts).

export type PlaceRows = (rows: ReportRow[]) => Promise<ReportRow[]>;

export function createPoolPlacement(reader: DeclarationsReader): PlaceRows {
  // One index per declared list: the reader hands out the same list until it changes.
  const indexes = new WeakMap<readonly DeclaredPool[], Map<string, string>>();
  const indexOf = (pools: readonly DeclaredPool[]) => {
    let index = indexes.get(pools);
    if (!index) {
      index = declaredPoolIndex(pools);
      indexes.set(pools, index);
    }
    return index;
  };

  return async (rows) => {
    const projects = new Set<string>();
    for (const row of rows) {
      const project = unplacedProject(row);
      if (project !== null) projects.add(project);
    }
    if (projects.size === 0) return rows;
    const byProject = new Map<string, Map<string, string>>();
    for (const project of projects) {
      const { pools } = await reader.forProject(project);
      if (pools.length > 0) byProject.set(project, indexOf(pools));
    }
    if (byProject.size === 0) return rows;
    return rows.map((row) => {
      const project = unplacedProject(row);
      const index = project === null ? undefined : byProject.get(project);
      return index ? withDeclaredPool(row, index) : row;
    });
  };
}
