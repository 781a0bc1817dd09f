import { describe, expect, it } from "vitest";
import { createStallWatchdog } from "../../src/queue/stall-watchdog.js";

// The watchdog's rule, on a clock of the test's own: recover only a worker that has room, has
// done nothing for stallMs, while jobs wait.

function rig(overrides: { waiting?: () => Promise<number>; room?: boolean } = {}) {
  let time = 0;
  let progress = 0;
  const recoveries: { waiting: number; idleMs: number }[] = [];
  const watchdog = createStallWatchdog({
    stallMs: 1_000,
    intervalMs: 250,
    now: () => time,
    progress: () => progress,
    hasRoom: () => overrides.room ?? true,
    waiting: overrides.waiting ?? (async () => 5),
    recover: async (info) => {
      recoveries.push(info);
    },
  });
  return {
    watchdog,
    recoveries,
    advance: (ms: number) => {
      time += ms;
    },
    work: () => {
      progress += 1;
    },
  };
}

describe("stall watchdog", () => {
  it("recovers a worker idle for stallMs while jobs wait, then waits stallMs again", async () => {
    const r = rig();
    r.advance(999);
    expect(await r.watchdog.check()).toBe(false);
    r.advance(1);
    expect(await r.watchdog.check()).toBe(true);
    expect(r.recoveries).toStrictEqual([{ waiting: 5, idleMs: 1_000 }]);
    r.advance(500);
    expect(await r.watchdog.check()).toBe(false);
    r.advance(500);
    expect(await r.watchdog.check()).toBe(true);
  });

  it("leaves a working worker alone", async () => {
    const r = rig();
    for (let i = 0; i < 10; i++) {
      r.advance(600);
      r.work();
      expect(await r.watchdog.check()).toBe(false);
    }
    expect(r.recoveries).toHaveLength(0);
  });

  it("leaves a full worker alone (it waits on its own jobs, e.g. ClickHouse down)", async () => {
    const r = rig({ room: false });
    r.advance(10_000);
    expect(await r.watchdog.check()).toBe(false);
  });

  it("leaves an idle worker alone when nothing waits, or when the queue cannot be read", async () => {
    const empty = rig({ waiting: async () => 0 });
    empty.advance(10_000);
    expect(await empty.watchdog.check()).toBe(false);
    const unreadable = rig({
      waiting: async () => {
        throw new Error("Command timed out");
      },
    });
    unreadable.advance(10_000);
    expect(await unreadable.watchdog.check()).toBe(false);
    expect(unreadable.recoveries).toHaveLength(0);
  });
});
