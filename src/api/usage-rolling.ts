// The last 24 h of /usage kept up to date by asking ClickHouse for its newest buckets only. A
// polled dashboard's answer (~9,000 points, 1.9 MB at minute windows grouped by provider and
// model) was read whole from ClickHouse, parsed and serialised again on every refresh, though
// reports arrive timestamped near now and change only the newest buckets. A refresh asks for the
// buckets from `recentFrom` on, keeps the previous answer's older points (and their JSON), and
// drops those the range has left. A report timestamped before `recentFrom` when it is stored (a
// skewed clock, a backlog drained late, an import) reaches its bucket at the next whole
// refresh: usage.ts makes one every READ_USAGE_FULL_REFRESH_MS, the bound on how stale an old
// bucket can be, as the cache's TTL is for the newest ones. Pure: no I/O here.

export interface UsageEntry {
  /** The bucket's start, Unix ms. */
  ms: number;
  /** The row's group as ClickHouse sorts it (provider, model, app as stored), JSON-encoded. */
  group: string;
  /** The point's JSON, kept (not the point: ~9,000 objects less per answer for the GC to mark). */
  json: string;
}

/** The entries of the new range: `kept`'s in [from, recentFrom), then `fresh`'s, by group and bucket. */
export function mergeRecent(
  kept: readonly UsageEntry[],
  fresh: readonly UsageEntry[],
  from: number,
  recentFrom: number,
): UsageEntry[] {
  const old = kept.filter((e) => e.ms >= from && e.ms < recentFrom);
  // Both lists are in ClickHouse's order (group, then bucket) and, within a group, every kept
  // bucket is before every fresh one: a merge by group rank, kept first on a tie.
  const rank = groupRanks([...old, ...fresh]);
  const out: UsageEntry[] = [];
  let i = 0;
  let j = 0;
  while (i < old.length || j < fresh.length) {
    const a = old[i];
    const b = fresh[j];
    if (
      b === undefined ||
      (a !== undefined && (rank.get(a.group) ?? 0) <= (rank.get(b.group) ?? 0))
    ) {
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
