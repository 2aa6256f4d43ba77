import { answer, type AnswersDeps } from './answers.ts';
import { decide, settledAction } from './decisions.ts';
import { closeOrphanedMissions, sweepMissions } from './lifecycle.ts';
import { countWaiting, listActions, listQuestions, type ListOptions } from './lists.ts';
import type { AnswerResults, DecisionResults, OpenQuestionList, PendingActionList } from './schemas.ts';

/**
 * Missions (contract §5, §6): actions awaiting permission and open questions. A decision or an
 * accepted answer settles its row and enqueues the mission's continuation as the agent's next
 * unit of work; the TurnWorker runs it and writes the agent turn. One concern a module: lists,
 * decisions, answers, and the missions' lifecycle.
 */
export class MissionsService {
  private readonly deps: AnswersDeps;

  constructor(deps: AnswersDeps) {
    this.deps = deps;
  }

  /** §5: the actions awaiting the caller's permission, oldest first (see lists.ts). */
  listActions(userId: string, options: ListOptions = {}): Promise<PendingActionList> {
    return listActions(this.deps, userId, options);
  }

  /** §6: the open questions put to the caller or on missions the caller owns, oldest first (see lists.ts). */
  listQuestions(userId: string, options: ListOptions = {}): Promise<OpenQuestionList> {
    return listQuestions(this.deps, userId, options);
  }

  /** How many actions and questions wait for the caller (in one session, if given). */
  countWaiting(userId: string, options: { sessionId?: string | undefined } = {}): Promise<{ actions: number; questions: number }> {
    return countWaiting(this.deps, userId, options);
  }

  /** How one of the caller's actions was settled: null while it is pending, and for one that is not theirs. */
  settledAction(userId: string, operationId: string): Promise<{ summary: string; outcome: 'approved' | 'rejected' | 'closed' } | null> {
    return settledAction(this.deps, userId, operationId);
  }

  /** §5: each entry decided on its own, one result per entry, in order. */
  decide(userId: string, entries: readonly unknown[]): Promise<DecisionResults> {
    return decide(this.deps, userId, entries);
  }

  /** §6: each entry judged on its own, one result per entry, in order; the first accepted answer wins. */
  answer(userId: string, entries: readonly unknown[]): Promise<AnswerResults> {
    return answer(this.deps, userId, entries);
  }

  /** Closes the missions nobody can settle any more, within `scope` (see lifecycle.ts); returns how many. */
  closeOrphanedMissions(scope: { missionId?: string; involving?: string } = {}): Promise<number> {
    return closeOrphanedMissions(this.deps, scope);
  }

  /** The housekeeping's sweep: orphans closed, stranded actions failed and stranded missions settled. */
  sweep(): Promise<{ orphansClosed: number; actionsFailed: number; missionsSettled: number }> {
    return sweepMissions(this.deps);
  }
}
