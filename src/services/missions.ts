import { type ExpressionBuilder, type Kysely, sql, type Transaction } from 'kysely';
import pMap from 'p-map';
import { z } from 'zod';
import type { Brain } from '../brains/brain.ts';
import { looksLikeId } from '../domain/ids.ts';
import { pageLimit } from '../domain/paging.ts';
import { isLongerThan, isUnstorableText, Problem, REASON_MAX_LENGTH, TEXT_MAX_LENGTH, UNSTORABLE_TEXT_RULE } from '../domain/problems.ts';
import { enqueueJob, openContinuationPayloads } from '../engine/queue-sql.ts';
import type { Stage } from '../engine/transactions.ts';
import type { TurnEngine } from '../engine/turn-engine.ts';
import type { Action, DB, MissionStatus, Question } from '../store/schema.ts';
import type { Dialect } from '../store/dialect.ts';
import type { Store } from '../store/store.ts';
import { isoNow } from './clock.ts';
import type { JobPayload } from './job-payload.ts';

/** Entries per bulk request (contract §5, §6). */
export const MAX_BULK_ENTRIES = 100;

export const DECISIONS = ['approve', 'approve_same_type', 'reject'] as const;
export type Decision = (typeof DECISIONS)[number];

// Bulk routes judge unstorable text (see isUnstorableText) per entry instead of failing the request.

/** One entry of POST /actions/decisions; checked per entry so that a bad one fails alone. */
export const DecisionEntrySchema = z.object({
  operation_id: z.string().refine((id) => !isUnstorableText(id), UNSTORABLE_TEXT_RULE),
  decision: z.enum(DECISIONS),
  reason: z.string()
    .refine((reason) => !isUnstorableText(reason), UNSTORABLE_TEXT_RULE)
    .refine((reason) => !isLongerThan(reason, REASON_MAX_LENGTH), `must be at most ${REASON_MAX_LENGTH} characters`)
    .nullish(),
});

export interface ActionView {
  operation_id: string;
  kind: string;
  summary: string;
  details: Record<string, unknown>;
  session_id: string;
  agent_id: string;
  mission_id: string;
  created_at: string;
}

export interface QuestionView {
  request_id: string;
  text: string;
  session_id: string;
  agent_id: string;
  mission_id: string;
  asked_of: string;
  /** What kind of answer fits: text, number, date, email, yesno or choice:a|b|c. */
  answer_type: string;
  created_at: string;
}

/** Where an item stands in a list ordered by (created_at, id): a page cursor's place. */
interface ListPosition {
  created_at: string;
  id: string;
}

/** Which page of a list, and of which session's items. */
export interface ListOptions {
  sessionId?: string | undefined;
  limit?: number | undefined;
  after?: string | undefined;
}

export type EntryError<C extends string> = { code: C; message: string };

export type DecisionResult =
  | { operation_id: string; ok: true; outcome: 'approved' | 'rejected'; also_approved: string[] }
  | { operation_id: string | null; ok: false; error: EntryError<'not_found' | 'already_settled' | 'invalid_decision'> };

export type AnswerResult =
  | { request_id: string; ok: true; accepted: true }
  | { request_id: string; ok: true; accepted: false; reason: string }
  | { request_id: string | null; ok: false; error: EntryError<'not_found' | 'already_answered'> };

export interface MissionsDeps {
  store: Store;
  engine: TurnEngine;
  brain: Brain;
}

/** Missions still able to move on: those that orphan-closing looks at. */
const LIVE_MISSION = ['waiting', 'active'] as const;

const NO_ACTION = 'No pending action with this operation_id.';
const NO_QUESTION = 'No open question with this request_id.';

/** Answers of one bulk request judged at once: a model's judge takes seconds an answer. */
export const JUDGED_AT_ONCE = 8;

/** An answer that passed its checks and its judge, not yet recorded. */
interface AcceptedAnswer {
  question: Question;
  text: string;
}

function isAccepted(judged: AnswerResult | AcceptedAnswer): judged is AcceptedAnswer {
  return 'question' in judged;
}

function questionNotFound(requestId: string | null): AnswerResult {
  return { request_id: requestId, ok: false, error: { code: 'not_found', message: NO_QUESTION } };
}

function alreadyAnswered(requestId: string): AnswerResult {
  return { request_id: requestId, ok: false, error: { code: 'already_answered', message: 'This question already has an accepted answer.' } };
}

/**
 * Missions (contract §5, §6): actions awaiting permission and open questions. A decision or an
 * accepted answer settles its row with a conditional update (so of two racing requests exactly
 * one wins) and, in the same transaction, enqueues the mission's continuation as the agent's
 * next unit of work; the TurnWorker runs it and writes the agent turn.
 */
export class MissionsService {
  private readonly deps: MissionsDeps;

  constructor(deps: MissionsDeps) {
    this.deps = deps;
  }

  private get db(): Kysely<DB> {
    return this.deps.store.db;
  }

  /**
   * §5: actions awaiting permission on missions the caller owns, oldest first: all of them, or a
   * page at a time when the caller pages (see listPage); `after` is the operation_id of the last
   * action of the page before (settled since or not).
   */
  async listActions(userId: string, options: ListOptions = {}): Promise<{ actions: ActionView[]; has_more: boolean }> {
    const { items, has_more } = await this.listPage('actions', userId, options, (position, take) => this.pendingActionsOf(userId, options.sessionId)
      .selectAll('actions')
      .$if(position !== undefined, (q) => q.where(laterThan('actions', position!)))
      .orderBy('actions.created_at').orderBy('actions.id')
      .$if(take !== undefined, (q) => q.limit(take!))
      .execute());
    return { actions: items.map(toActionView), has_more };
  }

  /**
   * §6: open questions put to the caller, plus open questions on missions the caller owns (of one
   * session, if given), oldest first: all of them, or a page at a time (`limit`, `after`: as for listActions).
   */
  async listQuestions(userId: string, options: ListOptions = {}): Promise<{ questions: QuestionView[]; has_more: boolean }> {
    const { items, has_more } = await this.listPage('questions', userId, options, (position, take) => this.openQuestionsFor(userId, options.sessionId)
      .selectAll('questions')
      .$if(position !== undefined, (q) => q.where(laterThan('questions', position!)))
      .orderBy('questions.created_at').orderBy('questions.id')
      .$if(take !== undefined, (q) => q.limit(take!))
      .execute());
    return { questions: items.map(toQuestionView), has_more };
  }

  /**
   * What both lists do around their own query, in this order: the page size and the cursor are
   * judged (422) before anything is read; a session id that cannot be one lists nothing (and never
   * reaches the database); missions nobody can settle any more are closed first, so that none of
   * their items is listed. `rowsAfter` reads up to `take` rows after `position` (all, when undefined).
   */
  private async listPage<R>(table: 'actions' | 'questions', userId: string, options: ListOptions,
    rowsAfter: (position: ListPosition | undefined, take: number | undefined) => Promise<R[]>): Promise<{ items: R[]; has_more: boolean }> {
    const limit = listLimit(options);
    const position = options.after === undefined ? undefined : await this.positionOf(table, userId, options.after);
    if (options.sessionId !== undefined && !looksLikeId('session', options.sessionId)) return { items: [], has_more: false };
    await this.closeOrphanedMissions({ involving: userId });
    // One row more than the page: whether it came says whether more follow.
    const rows = await rowsAfter(position, limit === undefined ? undefined : limit + 1);
    return { items: rows.slice(0, limit), has_more: limit !== undefined && rows.length > limit };
  }

  /** How many actions and questions wait for the caller (in one session, if given): what the lists would list, counted. */
  async countWaiting(userId: string, options: { sessionId?: string | undefined } = {}): Promise<{ actions: number; questions: number }> {
    if (options.sessionId !== undefined && !looksLikeId('session', options.sessionId)) return { actions: 0, questions: 0 };
    await this.closeOrphanedMissions({ involving: userId });
    const [actions, questions] = await Promise.all([
      this.pendingActionsOf(userId, options.sessionId).select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow(),
      this.openQuestionsFor(userId, options.sessionId).select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow(),
    ]);
    return { actions: Number(actions.n), questions: Number(questions.n) }; // PostgreSQL counts as bigint, a string
  }

  /** The actions waiting for the caller's permission: pending, on a live mission the caller owns. */
  private pendingActionsOf(userId: string, sessionId: string | undefined) {
    return this.db.selectFrom('actions')
      .innerJoin('missions', 'missions.id', 'actions.mission_id')
      .where('actions.owner_user_id', '=', userId)
      .where('actions.status', '=', 'pending')
      .where('missions.status', 'in', LIVE_MISSION)
      .$if(sessionId !== undefined, (q) => q.where('actions.session_id', '=', sessionId!));
  }

  /** The questions open to the caller: put to them (while still in the agent's workspace), or on a live mission they own. */
  private openQuestionsFor(userId: string, sessionId: string | undefined) {
    return this.db.selectFrom('questions')
      .innerJoin('missions', 'missions.id', 'questions.mission_id')
      .innerJoin('agents', 'agents.id', 'questions.agent_id')
      // The person asked sees it only while still a member of the agent's workspace.
      .leftJoin('memberships as asked', (join) => join
        .onRef('asked.workspace_id', '=', 'agents.workspace_id').onRef('asked.user_id', '=', 'questions.asked_of'))
      .where('missions.status', 'in', LIVE_MISSION)
      // Put in this shape so that the questions are found through the caller's own two indexes
      // (owner, asked), not by reading every open question of every account (6 ms at 10,000).
      .where((eb) => eb.and([
        eb.or([
          eb.and([eb('questions.owner_user_id', '=', userId), eb('questions.status', '=', 'open')]),
          eb.and([eb('questions.asked_of', '=', userId), eb('questions.status', '=', 'open')]),
        ]),
        eb.or([eb('questions.owner_user_id', '=', userId), eb('asked.user_id', 'is not', null)]),
      ]))
      .$if(sessionId !== undefined, (q) => q.where('questions.session_id', '=', sessionId!));
  }

  /**
   * Where a page cursor (`after`) stands in a list: the action or question it names, if it is one
   * the caller could have been listed (its owner, or for a question also the person asked).
   * Anything else, missing or another account's alike, is the same 422.
   */
  private async positionOf(table: 'actions' | 'questions', userId: string, id: string): Promise<ListPosition> {
    const row = looksLikeId(table === 'actions' ? 'action' : 'question', id)
      ? await this.db.selectFrom(table).select(['created_at', 'id']).where('id', '=', id)
        .where((eb) => (table === 'actions'
          ? eb('owner_user_id', '=', userId)
          : eb.or([eb('owner_user_id', '=', userId), eb('asked_of', '=', userId)])))
        .executeTakeFirst()
      : undefined;
    if (!row) {
      const name = table === 'actions' ? 'operation_id of an action' : 'request_id of a question';
      throw Problem.validation([{ path: 'after', message: `must be the ${name} listed to you on an earlier page` }]);
    }
    return { created_at: row.created_at, id: row.id };
  }

  /**
   * How one of the caller's actions was settled, so that a decision that came too late can say
   * so ("already approved"): null while it is pending, and for an action that is not the caller's.
   */
  async settledAction(userId: string, operationId: string): Promise<{ summary: string; outcome: 'approved' | 'rejected' | 'closed' } | null> {
    if (!looksLikeId('action', operationId)) return null;
    const action = await this.db.selectFrom('actions').select(['summary', 'status'])
      .where('id', '=', operationId).where('owner_user_id', '=', userId).executeTakeFirst();
    if (!action || action.status === 'pending') return null;
    // Approved actions go on to executing, done or failed; a closed one was never decided.
    const outcome = action.status === 'rejected' ? 'rejected' : action.status === 'closed' ? 'closed' : 'approved';
    return { summary: action.summary, outcome };
  }

  /** §5: one result per entry, in order; entries are settled one after the other. */
  async decide(userId: string, entries: unknown): Promise<{ results: DecisionResult[] }> {
    const list = bulkEntries(entries, 'decisions');
    const results: DecisionResult[] = [];
    for (const entry of list) results.push(await this.decideOne(userId, entry));
    return { results };
  }

  /**
   * §6: one result per entry, in order; the first accepted answer wins. Answers are judged up to
   * JUDGED_AT_ONCE at a time (a model's judge takes seconds per answer), those to one question
   * one after the other; the accepted ones are then settled in the entries' order, so missions
   * resume in the order the caller gave.
   */
  async answer(userId: string, entries: unknown): Promise<{ results: AnswerResult[] }> {
    const list = bulkEntries(entries, 'answers');
    const judged = new Array<AnswerResult | AcceptedAnswer | 'after_accepted'>(list.length);
    const byQuestion = Map.groupBy(list.keys(), (index) => stringField(list[index], 'request_id') ?? index);
    await pMap(byQuestion.values(), async (indexes) => {
      for (const [position, index] of indexes.entries()) {
        judged[index] = await this.judgeAnswer(userId, list[index]);
        if (isAccepted(judged[index])) {
          // Later answers to the same question are read again once this one is settled (below).
          for (const later of indexes.slice(position + 1)) judged[later] = 'after_accepted';
          return;
        }
      }
    }, { concurrency: JUDGED_AT_ONCE });
    const results: AnswerResult[] = [];
    for (const [index, entry] of list.entries()) {
      const verdict = judged[index]!;
      results.push(verdict === 'after_accepted' ? await this.answerOne(userId, entry)
        : isAccepted(verdict) ? await this.settleAnswer(verdict) : verdict);
    }
    return { results };
  }

  private async decideOne(userId: string, entry: unknown): Promise<DecisionResult> {
    const parsed = DecisionEntrySchema.safeParse(entry);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
      return { operation_id: stringField(entry, 'operation_id'), ok: false, error: { code: 'invalid_decision', message: `${where}${issue.message}` } };
    }
    const { operation_id: operationId, decision } = parsed.data;
    // Only a rejection keeps its reason (the agent re-plans around it); an approval ignores it.
    const reason = decision === 'reject' ? parsed.data.reason?.trim() || null : null;
    const notFound: DecisionResult = { operation_id: operationId, ok: false, error: { code: 'not_found', message: NO_ACTION } };
    const alreadySettled: DecisionResult = {
      operation_id: operationId, ok: false, error: { code: 'already_settled', message: 'This action was already approved or rejected.' },
    };

    if (!looksLikeId('action', operationId)) return notFound;
    const action = await this.db.selectFrom('actions').selectAll()
      .where('id', '=', operationId).where('owner_user_id', '=', userId).executeTakeFirst();
    if (!action) return notFound;
    if (await this.closeIfOrphaned(action.mission_id)) return notFound;
    if (action.status === 'closed') return notFound;
    if (action.status !== 'pending') return alreadySettled;

    return this.deps.engine.transact(async (trx, stage) => {
      const approve = decision !== 'reject';
      // Same kind, same agent, the caller's own; sessions that are gone are left to orphan-closing.
      const siblings = decision !== 'approve_same_type' ? [] : await trx.selectFrom('actions')
        .innerJoin('sessions', 'sessions.id', 'actions.session_id')
        .innerJoin('missions', 'missions.id', 'actions.mission_id')
        .selectAll('actions')
        .where('actions.owner_user_id', '=', userId).where('actions.agent_id', '=', action.agent_id)
        .where('actions.kind', '=', action.kind).where('actions.status', '=', 'pending')
        .where('actions.id', '!=', action.id).where('missions.status', 'in', LIVE_MISSION)
        .orderBy('actions.created_at').orderBy('actions.id')
        .execute();
      // Two bulk approvals over overlapping sets would deadlock if each locked in its own order.
      await this.lockActionsInIdOrder(trx, [action.id, ...siblings.map((a) => a.id)]);

      if (!(await settleAction(trx, action.id, approve ? 'approved' : 'rejected', decision, reason))) {
        const now = await trx.selectFrom('actions').select('status').where('id', '=', action.id).executeTakeFirst();
        return now?.status === 'closed' ? notFound : alreadySettled;
      }
      await this.continueMission(trx, stage, action, approve
        ? { kind: 'action_approved', missionId: action.mission_id, operationId: action.id }
        : { kind: 'action_rejected', missionId: action.mission_id, operationId: action.id, reason });
      const alsoApproved: string[] = [];
      for (const sibling of siblings) {
        if (!(await settleAction(trx, sibling.id, 'approved', decision, null))) continue;
        await this.continueMission(trx, stage, sibling, { kind: 'action_approved', missionId: sibling.mission_id, operationId: sibling.id });
        alsoApproved.push(sibling.id);
      }
      return { operation_id: operationId, ok: true, outcome: approve ? 'approved' : 'rejected', also_approved: alsoApproved } satisfies DecisionResult;
    });
  }

  /** PostgreSQL row locks taken in one global order (SQLite runs one write transaction at a time). */
  private async lockActionsInIdOrder(trx: Transaction<DB>, ids: string[]): Promise<void> {
    if (this.deps.store.dialect !== 'postgres' || ids.length < 2) return;
    await trx.selectFrom('actions').select('id').where('id', 'in', ids).orderBy('id').forUpdate().execute();
  }

  private async answerOne(userId: string, entry: unknown): Promise<AnswerResult> {
    const judged = await this.judgeAnswer(userId, entry);
    return isAccepted(judged) ? this.settleAnswer(judged) : judged;
  }

  /** An answer's checks and its judge's verdict: its result already, or an accepted answer still to settle. */
  private async judgeAnswer(userId: string, entry: unknown): Promise<AnswerResult | AcceptedAnswer> {
    const requestId = stringField(entry, 'request_id');
    const notFound = questionNotFound(requestId);
    if (requestId !== null && isUnstorableText(requestId)) {
      return { request_id: requestId, ok: false, error: { code: 'not_found', message: `No question has this request_id: it ${UNSTORABLE_TEXT_RULE}.` } };
    }
    // Still not_found (§6 has no other code for an entry), but saying what was wrong with it.
    if (requestId === null) {
      const message = entry !== null && typeof entry === 'object' && !Array.isArray(entry)
        ? 'The entry has no request_id: send the question\'s id (from GET /questions) as a string in `request_id`.'
        : 'The entry is not an object: send { "request_id": "req_…", "text": "…" }.';
      return { request_id: null, ok: false, error: { code: 'not_found', message } };
    }
    if (!looksLikeId('question', requestId)) return notFound;

    const question = await this.db.selectFrom('questions').selectAll()
      .where('id', '=', requestId)
      .where((eb) => eb.or([eb('owner_user_id', '=', userId), eb('asked_of', '=', userId)]))
      .executeTakeFirst();
    if (!question) return notFound;
    if (question.owner_user_id !== userId && !(await this.isMemberOfAgentWorkspace(userId, question.agent_id))) return notFound;
    if (await this.closeIfOrphaned(question.mission_id)) return notFound;
    if (question.status === 'closed') return notFound;
    if (question.status === 'answered') return alreadyAnswered(requestId);

    const text = (entry as Record<string, unknown>).text;
    if (typeof text !== 'string') {
      return { request_id: requestId, ok: true, accepted: false, reason: 'The answer is missing: send it as a string in `text`.' };
    }
    if (isUnstorableText(text)) {
      return {
        request_id: requestId, ok: true, accepted: false,
        reason: 'The NUL character (U+0000) and lone UTF-16 surrogates are not allowed in an answer; an answer without them is missing.',
      };
    }
    if (isLongerThan(text, TEXT_MAX_LENGTH)) {
      return { request_id: requestId, ok: true, accepted: false, reason: `The answer is longer than ${TEXT_MAX_LENGTH} characters; a shorter answer is missing.` };
    }
    const verdict = await this.deps.brain.judgeAnswer({ requestId, text: question.text, answerType: question.answer_type }, text, this.deps.engine.stopSignal);
    if (!verdict.accepted) {
      return { request_id: requestId, ok: true, accepted: false, reason: verdict.reason ?? 'The answer does not answer the question.' };
    }

    return { question, text };
  }

  /** An accepted answer recorded and its mission resumed, unless another answer was first. */
  private async settleAnswer({ question, text }: AcceptedAnswer): Promise<AnswerResult> {
    const requestId = question.id;
    return this.deps.engine.transact(async (trx, stage) => {
      const settled = await trx.updateTable('questions').set({ status: 'answered', answer: text, answered_at: isoNow() })
        .where('id', '=', requestId).where('status', '=', 'open').executeTakeFirst();
      if (Number(settled.numUpdatedRows) !== 1) {
        const now = await trx.selectFrom('questions').select('status').where('id', '=', requestId).executeTakeFirst();
        return now?.status === 'answered' ? alreadyAnswered(requestId) : questionNotFound(requestId);
      }
      await this.continueMission(trx, stage, question, { kind: 'question_answered', missionId: question.mission_id, requestId, answer: text });
      return { request_id: requestId, ok: true, accepted: true } satisfies AnswerResult;
    });
  }

  /** Enqueues a mission's next unit of work; it runs as the mission's owner, in the agent's FIFO line. */
  private async continueMission(trx: Transaction<DB>, stage: Stage, on: Action | Question, payload: JobPayload): Promise<void> {
    // The mission row before the agent's line: the order the finishing transaction takes them in.
    await trx.updateTable('missions').set({ status: 'active', updated_at: isoNow() })
      .where('id', '=', on.mission_id).where('status', '!=', 'closed').execute();
    await enqueueJob(trx, this.deps.store, stage, { agentId: on.agent_id, sessionId: on.session_id, userId: on.owner_user_id, kind: 'continuation', payload, userTurnId: null });
  }

  private async isMemberOfAgentWorkspace(userId: string, agentId: string): Promise<boolean> {
    const row = await this.db.selectFrom('agents')
      .innerJoin('memberships', 'memberships.workspace_id', 'agents.workspace_id')
      .select('agents.id').where('agents.id', '=', agentId).where('memberships.user_id', '=', userId)
      .executeTakeFirst();
    return row !== undefined;
  }

  private async closeIfOrphaned(missionId: string): Promise<boolean> {
    return (await this.closeOrphanedMissions({ missionId })) > 0;
  }

  /**
   * The periodic sweep (the housekeeping's): every orphaned mission closed, then actions and
   * missions nothing will ever finish settled. Says how many of each.
   */
  async sweep(): Promise<{ orphansClosed: number; actionsFailed: number; missionsSettled: number }> {
    const orphansClosed = await this.closeOrphanedMissions();
    // Rows before jobs: an action is approved, and a mission made active, in the transaction that
    // enqueues its continuation, so a continuation not open now never will be again.
    const inFlight = await this.db.selectFrom('actions').select(['id', 'mission_id'])
      .where('status', 'in', ['approved', 'executing']).execute();
    const active = await this.db.selectFrom('missions').select('id').where('status', '=', 'active').execute();
    if (inFlight.length === 0 && active.length === 0) return { orphansClosed, actionsFailed: 0, missionsSettled: 0 };
    const open = await openContinuationTargets(this.db);
    const actionsFailed = await this.failStrandedActions(inFlight.filter((action) => !open.operations.has(action.id)));
    const missionsSettled = await this.settleStrandedMissions(active.filter((mission) => !open.missions.has(mission.id)));
    return { orphansClosed, actionsFailed, missionsSettled };
  }

  /**
   * No orphans: a live mission whose session or agent is gone, or whose owner is no longer a
   * member of the agent's workspace, can never be settled by anyone. Close it with its pending
   * actions and open questions so that it stops showing up in lists. Scoped to one mission, to
   * the missions a user owns or was asked on, or (no scope) every mission. Returns how many closed.
   */
  async closeOrphanedMissions(scope: { missionId?: string; involving?: string } = {}): Promise<number> {
    const orphans = await this.db.selectFrom('missions')
      .leftJoin('sessions', 'sessions.id', 'missions.session_id')
      .leftJoin('agents', 'agents.id', 'missions.agent_id')
      .leftJoin('memberships', (join) => join
        .onRef('memberships.workspace_id', '=', 'agents.workspace_id').onRef('memberships.user_id', '=', 'missions.owner_user_id'))
      .select('missions.id')
      .where((eb) => eb.or([eb('sessions.id', 'is', null), eb('agents.id', 'is', null), eb('memberships.user_id', 'is', null)]))
      .$if(scope.missionId !== undefined, (q) => q.where('missions.id', '=', scope.missionId!))
      // The caller's live missions, and those with a question still open for the caller (live:
      // a mission's questions close with it). Each branch names its own index; a condition on
      // the status of all missions made SQLite read every live mission of every account.
      .where((eb) => (scope.involving === undefined ? eb('missions.status', 'in', LIVE_MISSION) : eb.or([
        eb.and([eb('missions.owner_user_id', '=', scope.involving), eb('missions.status', 'in', LIVE_MISSION)]),
        eb('missions.id', 'in', eb.selectFrom('questions').select('questions.mission_id')
          .where('questions.asked_of', '=', scope.involving).where('questions.status', '=', 'open')),
      ])))
      .execute();
    if (orphans.length === 0) return 0;
    const ids = orphans.map((o) => o.id);
    return this.db.transaction().execute(async (trx) => {
      // Actions, then questions, then missions: the order every settling transaction locks in.
      const closable = await trx.selectFrom('actions').select('id')
        .where('mission_id', 'in', ids).where('status', 'in', ['pending', 'approved']).execute();
      await this.lockActionsInIdOrder(trx, closable.map((a) => a.id));
      // An action already executing is left to finish; anything still waiting on a person is closed.
      await trx.updateTable('actions').set({ status: 'closed' })
        .where('mission_id', 'in', ids).where('status', 'in', ['pending', 'approved']).execute();
      await trx.updateTable('questions').set({ status: 'closed' })
        .where('mission_id', 'in', ids).where('status', '=', 'open').execute();
      const closed = await trx.updateTable('missions').set({ status: 'closed', updated_at: isoNow() })
        .where('id', 'in', ids).where('status', 'in', LIVE_MISSION).executeTakeFirst();
      return Number(closed.numUpdatedRows);
    });
  }

  /**
   * An approved action is settled by its continuation (done, or failed) in the transaction that
   * finishes that job. Only a runner that could not write even the failure (the engine's last
   * resort) leaves one approved or executing with its job finished: nothing would ever finish it,
   * so it is marked failed and its mission settled. Returns how many.
   */
  private async failStrandedActions(stranded: Array<{ id: string; mission_id: string }>): Promise<number> {
    let failed = 0;
    for (const action of stranded) {
      failed += await this.db.transaction().execute(async (trx) => {
        const updated = await trx.updateTable('actions').set({ status: 'failed' })
          .where('id', '=', action.id).where('status', 'in', ['approved', 'executing']).executeTakeFirst();
        if (Number(updated.numUpdatedRows) !== 1) return 0;
        await settleMission(trx, this.deps.store.dialect, action.mission_id, 'stopped', null);
        return 1;
      });
    }
    return failed;
  }

  /**
   * A mission is 'active' while a continuation of it is queued or running, and that
   * continuation settles it when it finishes. Only a runner that could not write even its
   * failure (the engine's last resort) leaves one 'active' with none: it is settled here as
   * stopped (or waiting, if something in it is still open). Returns how many.
   */
  private async settleStrandedMissions(stranded: Array<{ id: string }>): Promise<number> {
    let settled = 0;
    for (const { id } of stranded) {
      // Only if still active: its last continuation (or a stranded action above) may have settled it since.
      const status = await this.db.transaction().execute((trx) => settleMission(trx, this.deps.store.dialect, id, 'stopped', null, 'active'));
      if (status !== null && status !== 'active' && status !== 'closed') settled++;
    }
    return settled;
  }
}

/** What every open continuation is for, in one read for a whole sweep. */
async function openContinuationTargets(db: Kysely<DB>): Promise<{ operations: Set<string>; missions: Set<string> }> {
  const operations = new Set<string>();
  const missions = new Set<string>();
  for (const payload of await openContinuations(db, null, null)) {
    if (payload.kind === 'message') continue;
    missions.add(payload.missionId);
    if (payload.kind === 'action_approved') operations.add(payload.operationId);
  }
  return { operations, missions };
}

/** Continuations of a session's missions still queued or running (other than `exceptJobId`). */
async function openContinuations(db: Kysely<DB>, sessionId: string | null, exceptJobId: number | null): Promise<JobPayload[]> {
  return (await openContinuationPayloads(db, sessionId, exceptJobId)) as JobPayload[];
}

/**
 * Where a mission stands once one of its units of work has been recorded: it ends (`ending`:
 * done, or stopped) only when nothing in it is still open, that is no pending action, no open
 * question and no other continuation queued or running (`exceptJobId` is the one finishing now).
 * Otherwise it is active (a continuation will run) or waiting (on a person). A closed mission
 * never changes. With `onlyIf`, a mission in any other status is left as it is. Returns the
 * mission's status, or null when there is no such mission or it was left.
 */
export async function settleMission(
  trx: Transaction<DB>, dialect: Dialect, missionId: string, ending: 'done' | 'stopped', exceptJobId: number | null,
  onlyIf?: MissionStatus,
): Promise<MissionStatus | null> {
  const mission = await trx.selectFrom('missions').select(['status', 'session_id']).where('id', '=', missionId)
    .$if(dialect === 'postgres', (q) => q.forUpdate()).executeTakeFirst();
  if (!mission) return null;
  if (mission.status === 'closed') return 'closed';
  if (onlyIf !== undefined && mission.status !== onlyIf) return null;
  let status: MissionStatus = ending;
  const continuations = await openContinuations(trx, mission.session_id, exceptJobId);
  if (continuations.some((p) => p.kind !== 'message' && p.missionId === missionId)) {
    status = 'active';
  } else {
    const pending = await trx.selectFrom('actions').select('id').where('mission_id', '=', missionId).where('status', '=', 'pending')
      .limit(1).executeTakeFirst();
    const open = pending ?? await trx.selectFrom('questions').select('id').where('mission_id', '=', missionId).where('status', '=', 'open')
      .limit(1).executeTakeFirst();
    if (open) status = 'waiting';
  }
  await trx.updateTable('missions').set({ status, updated_at: isoNow() }).where('id', '=', missionId).where('status', '!=', 'closed').execute();
  return status;
}

/** The one conditional update that decides a race: only a pending action changes. */
async function settleAction(
  trx: Transaction<DB>, id: string, status: 'approved' | 'rejected', decision: Decision, reason: string | null,
): Promise<boolean> {
  const result = await trx.updateTable('actions').set({ status, decision, reason, decided_at: isoNow() })
    .where('id', '=', id).where('status', '=', 'pending').executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** A bulk body: an array, or `{ <key>: [...] }`, of 1–100 entries; anything else is 422. */
export function bulkEntries(body: unknown, key: string): unknown[] {
  const list = Array.isArray(body) ? body
    : body !== null && typeof body === 'object' && Array.isArray((body as Record<string, unknown>)[key]) ? (body as Record<string, unknown[]>)[key]!
    : null;
  if (list === null) throw Problem.validation([{ path: '', message: `must be a JSON array of entries or an object { "${key}": [...] }` }]);
  if (list.length < 1 || list.length > MAX_BULK_ENTRIES) {
    throw Problem.validation([{ path: Array.isArray(body) ? '' : key, message: `must hold 1 to ${MAX_BULK_ENTRIES} entries` }]);
  }
  return list;
}

function stringField(entry: unknown, field: string): string | null {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return null;
  const value = (entry as Record<string, unknown>)[field];
  return typeof value === 'string' ? value : null;
}

/**
 * How many items a list of actions or questions holds: every one, as contract §5 and §6 give the
 * lists (a client that knows nothing of paging must not miss any), unless the caller pages with
 * `limit` or `after`; then pageLimit's (50 when only `after` is given).
 */
function listLimit(options: ListOptions): number | undefined {
  return options.limit === undefined && options.after === undefined ? undefined : pageLimit(options.limit);
}

/** Rows after `position` in a list ordered by (created_at, id): the keyset condition of its next page. */
function laterThan<T extends 'actions' | 'questions'>(table: T, position: ListPosition) {
  return (eb: ExpressionBuilder<DB, T>) => {
    const createdAt = sql.ref<string>(`${table}.created_at`);
    return eb.or([
      eb(createdAt, '>', position.created_at),
      eb.and([eb(createdAt, '=', position.created_at), eb(sql.ref<string>(`${table}.id`), '>', position.id)]),
    ]);
  };
}

function toActionView(a: Action): ActionView {
  return {
    operation_id: a.id, kind: a.kind, summary: a.summary, details: parseDetails(a.details),
    session_id: a.session_id, agent_id: a.agent_id, mission_id: a.mission_id, created_at: a.created_at,
  };
}

function toQuestionView(q: Question): QuestionView {
  return {
    request_id: q.id, text: q.text, session_id: q.session_id, agent_id: q.agent_id, mission_id: q.mission_id,
    asked_of: q.asked_of, answer_type: q.answer_type, created_at: q.created_at,
  };
}

function parseDetails(json: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(json);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
  } catch {
    return {};
  }
}
