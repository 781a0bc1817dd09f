import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

// Which code a run measured: the git commit, and the files of the service that differed from it
// (the tree is shared; a result is only comparable with others of the same code).

export interface SourceInfo {
  commit: string;
  /** Uncommitted changes under src/ and workers/ at the start of the run. */
  changedFiles: string[];
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));

function git(args: string[]): string {
  // trimEnd: porcelain lines start with a status column that may be a space.
  return execFileSync("git", args, { cwd: ROOT, encoding: "utf8", stdio: "pipe" }).trimEnd();
}

export function sourceInfo(): SourceInfo {
  try {
    const changed = git(["status", "--porcelain", "--", "src", "workers"]);
    return {
      commit: git(["rev-parse", "--short=12", "HEAD"]),
      changedFiles: changed ? changed.split("\n").map((l) => l.slice(3)) : [],
    };
  } catch {
    return { commit: "unknown", changedFiles: [] };
  }
}
