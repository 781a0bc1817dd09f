// A process started under another (npm, a shell, the local stack's supervisor) stops when that
// parent is gone: npm passes SIGINT and SIGTERM on, but dies of SIGHUP or SIGKILL without a word,
// and Linux then hands the orphan to init. Node has no PR_SET_PDEATHSIG, so the parent id is
// polled; a change means the parent exited.

/**
 * The parent when this module was first loaded: before any entry's first await, so that a parent
 * gone while the process was still starting (its clients, its engine) is noticed too.
 */
const STARTED_UNDER = process.ppid;

/** `parent`: the PID it was started under, when the starter says (else the one it loaded under). */
export function stopWhenParentExits(
  stop: () => void,
  everyMs = 500,
  parent = STARTED_UNDER,
): () => void {
  if (process.ppid !== parent) {
    // Gone already: stop on the next turn, once the caller has set up what stop needs.
    setImmediate(stop);
    return () => {};
  }
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    stop();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
