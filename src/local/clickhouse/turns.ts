// The embedded engine runs one query at a time; this decides whose turn is next. Inserts go before
// queued reads: the hot headroom and the alerts wait for an insert (a report's freshness), while
// a read waiting is mostly a dashboard's refresh behind an answer already served
// (api/query-cache.ts). So that reads are never starved by a stream of inserts, once
// `maxOvertakes` inserts went before waiting reads the oldest read goes next: while reads wait,
// they get at least one turn in `maxOvertakes + 1`. Within a kind, first come first served.

export type Kind = "insert" | "read";

export interface Turns {
  /** Runs `task` when its turn comes; settles as it does. */
  run<T>(kind: Kind, task: () => Promise<T>): Promise<T>;
  /** Resolves when nothing runs and nothing waits. */
  idle(): Promise<void>;
}

export function createTurns(maxOvertakes = 2): Turns {
  const waiting: Record<Kind, Array<() => void>> = { insert: [], read: [] };
  let running = false;
  /** Inserts that went before the oldest waiting read. */
  let overtakes = 0;
  let idlers: Array<() => void> = [];

  const pump = () => {
    if (running) return;
    const readsDue = waiting.read.length > 0 && overtakes >= maxOvertakes;
    const next = readsDue ? waiting.read.shift() : (waiting.insert.shift() ?? waiting.read.shift());
    if (next === undefined) {
      for (const resolve of idlers) resolve();
      idlers = [];
      return;
    }
    running = true;
    next();
  };

  return {
    run<T>(kind: Kind, task: () => Promise<T>): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        waiting[kind].push(() => {
          if (kind === "read") overtakes = 0;
          else if (waiting.read.length > 0) overtakes += 1;
          Promise.resolve()
            .then(task)
            .then(resolve, reject)
            .finally(() => {
              running = false;
              pump();
            });
        });
        pump();
      });
    },
    idle() {
      if (!running && waiting.insert.length === 0 && waiting.read.length === 0) {
        return Promise.resolve();
      }
      return new Promise((resolve) => idlers.push(resolve));
    },
  };
}
