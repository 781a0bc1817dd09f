// One series' alert state, one sample at a time. Pure: the caller keeps the state (Redis).
//
// - Levels: `ok` below the warning threshold, `warning` from it, `critical` from the critical
//   threshold. Going up is immediate; going down needs usage `hysteresis` points below the
//   threshold, so a value flapping around a threshold does not flip the level each time.
// - What receivers were last told (`notified`) is kept apart from the level: an alert is sent
//   when the level rises above what they know; `resolved` when it is back to ok after they were
//   told of a problem. A drop from critical to warning is not news: nothing is sent, and a new
//   rise to critical sends nothing either until the series resolved.
// - Cooldown: a level that was sent less than `cooldownMs` ago (report time) is not sent again;
//   the series stays un-notified, and is sent once the cooldown is over if usage is still high.
//   An escalation to critical (receivers were told `warning`) is never held back.

export type Level = "ok" | "warning" | "critical";
export type Transition = "warning" | "critical" | "resolved";

export interface Thresholds {
  warnPct: number;
  criticalPct: number;
  hysteresisPct: number;
  cooldownMs: number;
}

export interface MachineState {
  level: Level;
  notified: Level;
  /** When each level was last sent, in report time (Unix ms). */
  sentAt: { warning?: number; critical?: number };
  /** Alerts sent so far: part of each event's identity. */
  seq: number;
}

export const INITIAL: MachineState = { level: "ok", notified: "ok", sentAt: {}, seq: 0 };

const RANK: Record<Level, number> = { ok: 0, warning: 1, critical: 2 };

export function levelFor(current: Level, pct: number, th: Thresholds): Level {
  if (pct >= th.criticalPct) return "critical";
  const h = th.hysteresisPct;
  if (current === "critical" && pct >= th.criticalPct - h) return "critical";
  if (pct >= th.warnPct) return "warning";
  if (current !== "ok" && pct >= th.warnPct - h) return "warning";
  return "ok";
}

export function step(
  state: MachineState,
  pct: number,
  at: number,
  th: Thresholds,
): { state: MachineState; fire: Transition | null } {
  const level = levelFor(state.level, pct, th);
  const next: MachineState = { ...state, level, sentAt: { ...state.sentAt } };

  if (level === "ok") {
    if (state.notified === "ok") return { state: next, fire: null };
    next.notified = "ok";
    next.seq += 1;
    return { state: next, fire: "resolved" };
  }
  if (RANK[level] <= RANK[state.notified]) return { state: next, fire: null };
  const last = state.sentAt[level];
  // Receivers told `warning` hear of critical at once, even soon after an earlier critical
  // (resolved since): the cooldown holds back repeats, not news.
  const escalation = level === "critical" && state.notified === "warning";
  if (!escalation && last !== undefined && at - last < th.cooldownMs) {
    return { state: next, fire: null };
  }
  next.notified = level;
  next.sentAt[level] = at;
  next.seq += 1;
  return { state: next, fire: level };
}
