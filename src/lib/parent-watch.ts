// A process started under another (npm, a shell, the local stack's supervisor) stops when that
// parent is gone: npm passes SIGINT and SIGTERM on, but dies of SIGHUP or SIGKILL without a word,
// and Linux then hands the orphan to init. Node has no PR_SET_PDEATHSIG, so the parent id is
// polled; a change means the parent exited.

export function stopWhenParentExits(stop: () => void, everyMs = 500): () => void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    stop();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
