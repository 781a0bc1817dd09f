import { readFile } from "node:fs/promises";
import type { DeclaredLimit, DeclaredPool } from "../providers/declared-limit.js";
import { print, table } from "./context.js";
import { withControl } from "./control.js";
import { UsageError } from "./errors.js";

// `headroom limits …` and `headroom pools …`: a project's declarations, through the control plane's
// functions (the HTTP routes call the same ones; each change is in the audit log). `set` replaces
// the project's whole set, as PUT does. Flags are parsed and checked in declarations-program.ts.

interface JsonOption {
  json: boolean;
}

/** What `set` replaces the set with: a file's, the flags', or none. */
export type Source<T> = { file: string } | { items: T[] } | { none: true };

/** A file as `list --json` prints it (`{"limits": [...]}`), or a bare array; `-`: stdin. */
async function readItems(file: string, field: "limits" | "pools"): Promise<unknown> {
  let text: string;
  try {
    text = file === "-" ? await readStdin() : await readFile(file, "utf8");
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${file} is not JSON: ${(err as Error).message}`);
  }
  return Array.isArray(value) ? { [field]: value } : value;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function bodyOf<T>(source: Source<T>, field: "limits" | "pools"): Promise<unknown> {
  if ("file" in source) return readItems(source.file, field);
  return { [field]: "items" in source ? source.items : [] };
}

const limitsTable = (limits: DeclaredLimit[]) =>
  limits.length === 0
    ? "no declared limits"
    : table(
        ["PROVIDER", "MODEL", "POOL", "DIMENSION", "WINDOW", "LIMIT"],
        limits.map((l) => [l.provider, l.model, l.pool ?? "every", l.dimension, l.window, l.limit]),
      );

const poolsTable = (pools: DeclaredPool[]) =>
  pools.length === 0
    ? "no declared pools"
    : table(
        ["PROVIDER", "POOL", "APPS"],
        pools.map((p) => [p.provider, p.label, p.apps.join(",")]),
      );

export const limitsSet = (project: string, source: Source<DeclaredLimit>, opts: JsonOption) =>
  withControl(async (control, cli) => {
    const out = await control.setLimits(cli, project, await bodyOf(source, "limits"));
    print(
      opts.json,
      out,
      () => `project ${project}: ${out.limits.length} declared limits\n${limitsTable(out.limits)}`,
    );
  });

export const limitsList = (project: string, opts: JsonOption) =>
  withControl(async (control, cli) => {
    const out = await control.getLimits(cli, project);
    print(opts.json, out, () => limitsTable(out.limits));
  });

export const poolsSet = (project: string, source: Source<DeclaredPool>, opts: JsonOption) =>
  withControl(async (control, cli) => {
    const out = await control.setPools(cli, project, await bodyOf(source, "pools"));
    print(
      opts.json,
      out,
      () => `project ${project}: ${out.pools.length} declared pools\n${poolsTable(out.pools)}`,
    );
  });

export const poolsList = (project: string, opts: JsonOption) =>
  withControl(async (control, cli) => {
    const out = await control.getPools(cli, project);
    print(opts.json, out, () => poolsTable(out.pools));
  });
