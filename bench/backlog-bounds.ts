// How long a backlog lasts at a rate before the edge's first bound closes intake (503): the
// waiting jobs reach BACKLOG_MAX_JOBS, or Redis's memory reaches REDIS_MEMORY_MAX_RATIO of
// maxmemory. Reports per job grow with the rate (group commit), so at low rates the job count
// binds first, and at high rates the memory does.

export interface BacklogMeasure {
  /** Reports per second arriving while nothing drains the queue. */
  rate: number;
  reportsPerJob: number;
  /** Redis memory one queued report takes, its share of its job included. */
  bytesPerReport: number;
}

export interface BacklogLimits {
  maxJobs: number;
  /** Memory free for the backlog: maxmemory x REDIS_MEMORY_MAX_RATIO, less what is used. */
  memoryBudgetBytes: number;
}

export interface BacklogBounds {
  secondsToJobs: number;
  secondsToMemory: number;
  binds: "jobs" | "memory";
  /** The outage the backlog absorbs before edges answer 503. */
  seconds: number;
}

export function backlogBounds(m: BacklogMeasure, limits: BacklogLimits): BacklogBounds {
  const secondsToJobs = (limits.maxJobs * m.reportsPerJob) / m.rate;
  const secondsToMemory = limits.memoryBudgetBytes / (m.bytesPerReport * m.rate);
  const binds = secondsToJobs <= secondsToMemory ? "jobs" : "memory";
  return {
    secondsToJobs,
    secondsToMemory,
    binds,
    seconds: Math.min(secondsToJobs, secondsToMemory),
  };
}
