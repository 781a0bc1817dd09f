// Advice answers as sent (body and ETag), kept per project and ask while the views they were
// made from hold (queries/advice.ts): many clients asking the same thing within a second cost one
// answer. Bounded per project and in all, the least recently asked project's oldest answer
// dropped first, so that one tenant's many distinct asks (every `tokens` value, made-up models)
// push out only its own.

/** Answers a project keeps at most. */
export const ADVICE_ANSWERS_PER_PROJECT = 64;
/** Answers kept at most, every project together. */
export const ADVICE_ANSWERS_TOTAL = 4_096;

export interface AdviceAnswer {
  body: Buffer;
  etag: string;
  /** What it was made from: the answer holds while this is the project's current one, */
  from: object;
  /** and within the second it was made in (Unix s). */
  second: number;
}

export interface AdviceAnswers {
  get(project: string, ask: string): AdviceAnswer | undefined;
  set(project: string, ask: string, answer: AdviceAnswer): void;
  /** Forgets a project's answers (its views moved on). */
  drop(project: string): void;
  /** Answers kept, in all or of one project. */
  size(project?: string): number;
}

export function createAdviceAnswers(
  opts: { perProject: number; total: number } = {
    perProject: ADVICE_ANSWERS_PER_PROJECT,
    total: ADVICE_ANSWERS_TOTAL,
  },
): AdviceAnswers {
  // Both in order of use, least recent first.
  const projects = new Map<string, Map<string, AdviceAnswer>>();
  let count = 0;
  /** The project used last: already last in `projects`. */
  let last: string | undefined;

  const dropOldest = (project: string, kept: Map<string, AdviceAnswer>) => {
    kept.delete(kept.keys().next().value as string);
    count--;
    if (kept.size === 0) {
      projects.delete(project);
      if (last === project) last = undefined;
    }
  };

  return {
    get(project, ask) {
      const kept = projects.get(project);
      const answer = kept?.get(ask);
      if (!kept || !answer) return undefined;
      // Projects in order of use; a project's answers in order of making (each is made again
      // every second it is asked in, so that is nearly the order of use, without a move per hit).
      if (project !== last) {
        projects.delete(project);
        projects.set(project, kept);
        last = project;
      }
      return answer;
    },
    set(project, ask, answer) {
      let kept = projects.get(project);
      if (kept) {
        projects.delete(project);
        if (kept.delete(ask)) count--;
      } else kept = new Map();
      // Its own oldest first, then the least recently asked project's.
      while (kept.size >= opts.perProject) dropOldest(project, kept);
      projects.set(project, kept);
      while (count >= opts.total) {
        const [oldest, theirs] = projects.entries().next().value as [
          string,
          Map<string, AdviceAnswer>,
        ];
        dropOldest(oldest, theirs);
      }
      kept.set(ask, answer);
      count++;
      projects.set(project, kept);
      last = project;
    },
    drop(project) {
      const kept = projects.get(project);
      if (!kept) return;
      count -= kept.size;
      projects.delete(project);
      if (last === project) last = undefined;
    },
    size(project) {
      return project === undefined ? count : (projects.get(project)?.size ?? 0);
    },
  };
}
