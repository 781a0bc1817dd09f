import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// Summarises V8 CPU profiles (`node --cpu-prof`, written by `npm run bench -- --profile` under
// <out>/profiles/<process>/): where a process spent its time, by package and by function, self
// and inclusive. Usage: tsx bench/cpu-profile.ts <file-or-dir>... [--top N]

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Where a frame's code comes from: a package, one of our files, Node itself, or V8. */
export function category(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1] as string;
  if (url.startsWith("node:")) return "node:internal";
  const path = url.startsWith("file://") ? fileURLToPath(url) : url;
  const rel = relative(ROOT, path);
  return rel.startsWith("..") ? path : rel;
}

const label = (f: CallFrame) =>
  `${f.functionName || "(anonymous)"} ${category(f)}${f.url ? `:${f.lineNumber + 1}` : ""}`;

export interface Summary {
  totalMs: number;
  byCategory: [string, number][];
  selfByFunction: [string, number][];
  inclusiveByFunction: [string, number][];
}

export function summarize(profile: Profile): Summary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  let totalUs = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0;
    self.set(id, (self.get(id) ?? 0) + dt);
    totalUs += dt;
  });
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  const byCategory = new Map<string, number>();
  const selfByFunction = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (!node) continue;
    add(byCategory, category(node.callFrame), us);
    add(selfByFunction, label(node.callFrame), us);
    // Each function once per stack, however deep the recursion.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const frame = byId.get(cur)?.callFrame;
      if (!frame || frame.functionName === "(root)") continue;
      const l = label(frame);
      if (!seen.has(l)) {
        seen.add(l);
        add(inclusive, l, us);
      }
    }
  }
  const top = (m: Map<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]).map(([k, us]): [string, number] => [k, us / 1000]);
  return {
    totalMs: totalUs / 1000,
    byCategory: top(byCategory),
    selfByFunction: top(selfByFunction),
    inclusiveByFunction: top(inclusive),
  };
}

function files(paths: string[]): string[] {
  return paths.flatMap((p) =>
    statSync(p).isDirectory()
      ? readdirSync(p, { recursive: true })
          .map(String)
          .filter((f) => f.endsWith(".cpuprofile"))
          .map((f) => join(p, f))
      : [p],
  );
}

function print(file: string, s: Summary, top: number) {
  const busy = s.totalMs - (s.byCategory.find(([k]) => k === "(idle)")?.[1] ?? 0);
  const pct = (ms: number) => `${((ms / Math.max(1, busy)) * 100).toFixed(1).padStart(5)}%`;
  const lines = [
    `\n## ${file}`,
    `profiled ${(s.totalMs / 1000).toFixed(1)} s, busy ${(busy / 1000).toFixed(1)} s (percentages of busy time)`,
    "\nself time by package / file:",
    ...s.byCategory
      .filter(([k]) => k !== "(idle)")
      .slice(0, top)
      .map(([k, ms]) => `  ${pct(ms)}  ${k}`),
    "\nself time by function:",
    ...s.selfByFunction
      .filter(([k]) => !k.startsWith("(idle)"))
      .slice(0, top)
      .map(([k, ms]) => `  ${pct(ms)}  ${k}`),
    "\ninclusive time by function:",
    ...s.inclusiveByFunction
      .filter(([k]) => !k.startsWith("(idle)") && !k.startsWith("(program)"))
      .slice(0, top)
      .map(([k, ms]) => `  ${pct(ms)}  ${k}`),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--top");
  const top = at >= 0 ? Number(args.splice(at, 2)[1]) : 25;
  if (args.length === 0) {
    process.stderr.write("usage: tsx bench/cpu-profile.ts <file-or-dir>... [--top N]\n");
    process.exit(2);
  }
  for (const f of files(args)) {
    print(f, summarize(JSON.parse(readFileSync(f, "utf8")) as Profile), top);
  }
}
