// The last 24 h of /usage kept up to date by asking ClickHouse only for the buckets that can
// have changed. A polled dashboard's answer (~11,000 points at minute windows grouped by provider
// and model) read whole joins every bucket's windows and pools; reports arrive timestamped near
// now, so a refresh reads the newest buckets (from `recentFrom` on) and, of the older ones, those
// whose count of reports differs from the kept points' (a late or back-dated report: every
// report adds one to its bucket's count, so an unchanged count is an unchanged bucket). It keeps
// the previous answer's other points (and their JSON) and drops those the range has left. A
// rewrite that adds no report (a backfill, `headroom rederive-windows`) reaches its buckets at
// the next whole refresh, every READ_USAGE_FULL_REFRESH_MS. Pure: no I/O here.

export interface UsageEntry {
  /** The bucket's start, Unix ms. */
  ms: number;
  /** The row's group as ClickHouse sorts it (provider, model, app as stored), JSON-encoded. */
  group: string;
  /** The point's JSON, kept (not the point: ~9,000 objects less per answer for the GC to mark). */
  json: string;
  /** The point's count of reports: what tells a bucket changed. */
  reports: number;
}

/**
 * The buckets in [from, recentFrom) whose count of reports (`counts`: bucket start, Unix ms →
 * count, over every group) is not the kept points' sum: those to read again. A bucket kept but
 * no longer counted (a retention drop) is one.
 */
export function changedBuckets(
  kept: readonly UsageEntry[],
  counts: ReadonlyMap<number, number>,
  from: number,
  recentFrom: number,
): number[] {
  const held = new Map<number, number>();
  for (const e of kept) {
    if (e.ms >= from && e.ms < recentFrom) held.set(e.ms, (held.get(e.ms) ?? 0) + e.reports);
  }
  const changed = new Set<number>();
  for (const [ms, n] of counts) {
    if (ms >= from && ms < recentFrom && held.get(ms) !== n) changed.add(ms);
  }
  for (const ms of held.keys()) if (!counts.has(ms)) changed.add(ms);
  return [...changed].sort((a, b) => a - b);
}

/**
 * The entries of the new range: `kept`'s in [from, recentFrom) but for the `changed` buckets,
 * and `fresh`'s (read from recentFrom on and for the changed buckets), by group and bucket.
 */
export function mergeRecent(
  kept: readonly UsageEntry[],
  fresh: readonly UsageEntry[],
  from: number,
  recentFrom: number,
  changed: ReadonlySet<number> = new Set(),
): UsageEntry[] {
  const old = kept.filter((e) => e.ms >= from && e.ms < recentFrom && !changed.has(e.ms));
  // Both lists are in ClickHouse's order (group, then bucket), and no bucket of a group is in
  // both: a merge by group rank, then bucket.
  const rank = groupRanks([...old, ...fresh]);
  const before = (a: UsageEntry, b: UsageEntry) => {
    const ra = rank.get(a.group) ?? 0;
    const rb = rank.get(b.group) ?? 0;
    return ra < rb || (ra === rb && a.ms < b.ms);
  };
  const out: UsageEntry[] = [];
  let i = 0;
  let j = 0;
  while (i < old.length || j < fresh.length) {
    const a = old[i];
    const b = fresh[j];
    if (b === undefined || (a !== undefined && before(a, b))) {
      out.push(a as UsageEntry);
      i++;
    } else {
      out.push(b);
      j++;
    }
  }
  return out;
}

/** Each group's place in ClickHouse's ORDER BY: its values compared as UTF-8 bytes, in order. */
function groupRanks(entries: readonly { group: string }[]): Map<string, number> {
  const groups = [...new Set(entries.map((e) => e.group))].map((g) => ({
    g,
    values: (JSON.parse(g) as string[]).map((v) => Buffer.from(v)),
  }));
  groups.sort((x, y) => {
    for (let k = 0; k < x.values.length; k++) {
      const c = Buffer.compare(x.values[k] as Buffer, y.values[k] as Buffer);
      if (c !== 0) return c;
    }
    return 0;
  });
  return new Map(groups.map(({ g }, k) => [g, k]));
}

/** JSON.stringify of `{...head, points}` from the points' kept JSON. */
export function answerJson(head: object, entries: readonly { json: string }[]): string {
  const open = JSON.stringify(head).slice(0, -1);
  return `${open}${open.length > 1 ? "," : ""}"points":${pointsJson(entries)}}`;
}

/** The points' JSON array, from their kept JSON. */
export const pointsJson = (entries: readonly { json: string }[]) =>
  `[${entries.map((e) => e.json).join(",")}]`;

/** Whether `fresh` is what `kept` already holds from `recentFrom` on: nothing to serialise again. */
export function sameRecent(
  kept: readonly UsageEntry[],
  fresh: readonly UsageEntry[],
  recentFrom: number,
): boolean {
  const recent = kept.filter((e) => e.ms >= recentFrom);
  return (
    recent.length === fresh.length &&
    recent.every((e, i) => {
      const f = fresh[i] as UsageEntry;
      return e.ms === f.ms && e.group === f.group && e.json === f.json;
    })
  );
}
