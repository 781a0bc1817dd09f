import type { Capacity } from "./capacity.js";
import type { BareCeiling, EnqueueCeiling, InsertCeiling } from "./ceilings.js";
import type { Figure } from "./figure.js";
import type { BatchPhase } from "./phase-batch.js";
import type { DrainPhase } from "./phase-drain.js";
import type { EndToEndPhase } from "./phase-e2e.js";
import type { EdgePhase } from "./phase-edge.js";
import type { OtlpPhase } from "./phase-otlp.js";
import type { ViewsPhase } from "./phase-views.js";
import type { Machine } from "./proc-stats.js";
import type { SourceInfo } from "./source.js";

// What a run of `npm run bench` measured and what latest.json holds: the run, each phase's
// results, and the figures made of them (figures.ts, targets.ts).

export interface RunInfo {
  machine: Machine;
  /** The command that made the run, as typed (npm run … -- options). */
  command: string;
  source: SourceInfo;
  options: Record<string, unknown>;
  settings: Record<string, string>;
}

export interface PhaseResults {
  ceilings: { bareFastify: BareCeiling; bullmq: EnqueueCeiling; clickhouse: InsertCeiling };
  edgeAlone: EdgePhase;
  edgeBatch: BatchPhase;
  /** Phase 2c, OTLP exports (issue 47); absent from runs before it. */
  edgeOtlp?: OtlpPhase;
  drain: DrainPhase;
  saturation: EndToEndPhase;
  fixedRate: EndToEndPhase & { requestedRate: number };
}

export interface BenchResults extends RunInfo, PhaseResults {
  version: 1;
  figures: Figure[];
  capacity: Capacity;
  /** The same for phase 2b's batches, carried until stored (null when they were not). */
  batchCapacity: Capacity | null;
  summary: { targets: number; met: number };
  /** Issue 48: ClickHouse's CPU per report with every view ÷ `reports` alone; absent before it. */
  clickhouseViews?: ViewsPhase;
}
