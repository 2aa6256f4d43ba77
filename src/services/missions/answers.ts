import pMap from 'p-map';
import type { Brain } from '../../brains/brain.ts';
import { looksLikeId } from '../../domain/ids.ts';
import { isLongerThan, isUnstorableText, TEXT_MAX_LENGTH, UNSTORABLE_TEXT_RULE } from '../../domain/problems.ts';
import type { Question } from '../../store/schema.ts';
import { localIsoNow } from '../clock.ts';
import { closeIfOrphaned, continueMission, type MissionsDeps } from './lifecycle.ts';
import { type AnswerResult, type AnswerResults, stringField } from './schemas.ts';

/** Answering needs a judge besides: whether an answer fits its question is the brain's to say. */
export interface AnswersDeps extends MissionsDeps {
  brain: Brain;
}

/** Answers of one bulk request judged at once: a model's judge takes seconds an answer. */
const JUDGED_AT_ONCE = 8;

const NO_QUESTION = 'No open question with this request_id.';

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

/** A question its session's cancel closed (§9.4): settled for good, as an answered one is. */
function cancelledQuestion(requestId: string): AnswerResult {
  return { request_id: requestId, ok: false, error: { code: 'already_answered', message: 'This question was closed unanswered: its session\'s work was cancelled.' } };
}

/**
 * §6: one result per entry, in order; the first accepted answer wins. Answers are judged up to
 * JUDGED_AT_ONCE at a time (a model's judge takes seconds per answer), those to one question
 * one after the other; the accepted ones are then settled in the entries' order, so missions
 * resume in the order the caller gave.
 */
export async function answer(deps: AnswersDeps, userId: string, entries: readonly unknown[]): Promise<AnswerResults> {
  const judged = new Array<AnswerResult | AcceptedAnswer | 'after_accepted'>(entries.length);
  const byQuestion = Map.groupBy(entries.keys(), (index) => stringField(entries[index], 'request_id') ?? index);
  await pMap(byQuestion.values(), async (indexes) => {
    for (const [position, index] of indexes.entries()) {
      judged[index] = await judgeAnswer(deps, userId, entries[index]);
      if (isAccepted(judged[index])) {
        // Later answers to the same question are read again once this one is settled (below).
        for (const later of indexes.slice(position + 1)) judged[later] = 'after_accepted';
        return;
      }
    }
  }, { concurrency: JUDGED_AT_ONCE });
  const results: AnswerResult[] = [];
  for (const [index, entry] of entries.entries()) {
    const verdict = judged[index]!;
    results.push(verdict === 'after_accepted' ? await answerOne(deps, userId, entry)
      : isAccepted(verdict) ? await settleAnswer(deps, verdict) : verdict);
  }
  return { results };
}

async function answerOne(deps: AnswersDeps, userId: string, entry: unknown): Promise<AnswerResult> {
  const judged = await judgeAnswer(deps, userId, entry);
  return isAccepted(judged) ? settleAnswer(deps, judged) : judged;
}

/** An answer's checks and its judge's verdict: its result already, or an accepted answer still to settle. */
async function judgeAnswer(deps: AnswersDeps, userId: string, entry: unknown): Promise<AnswerResult | AcceptedAnswer> {
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

  const question = await deps.store.db.selectFrom('questions').selectAll()
    .where('id', '=', requestId)
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), eb('asked_of', '=', userId)]))
    .executeTakeFirst();
  if (!question) return notFound;
  if (question.owner_user_id !== userId && !(await isMemberOfAgentWorkspace(deps, userId, question.agent_id))) return notFound;
  if (await closeIfOrphaned(deps, question.mission_id)) return notFound;
  if (question.status === 'closed') return notFound;
  // Closed by its session's cancel (§9.4): settled, as an answered one is.
  if (question.status === 'cancelled') return cancelledQuestion(requestId);
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
  const verdict = await deps.brain.judgeAnswer({ requestId, text: question.text, answerType: question.answer_type }, text, deps.engine.stopSignal);
  if (!verdict.accepted) {
    return { request_id: requestId, ok: true, accepted: false, reason: verdict.reason ?? 'The answer does not answer the question.' };
  }

  return { question, text };
}

/** An accepted answer recorded and its mission resumed, unless another answer was first. */
async function settleAnswer(deps: AnswersDeps, { question, text }: AcceptedAnswer): Promise<AnswerResult> {
  const requestId = question.id;
  return deps.engine.transact(async (tx) => {
    // The one conditional update that decides a race: only an open question is answered.
    const settled = await tx.db.updateTable('questions').set({ status: 'answered', answer: text, answered_at: localIsoNow() })
      .where('id', '=', requestId).where('status', '=', 'open').executeTakeFirst();
    if (Number(settled.numUpdatedRows) !== 1) {
      const now = await tx.db.selectFrom('questions').select('status').where('id', '=', requestId).executeTakeFirst();
      if (now?.status === 'cancelled') return cancelledQuestion(requestId);
      return now?.status === 'answered' ? alreadyAnswered(requestId) : questionNotFound(requestId);
    }
    await continueMission(tx, deps.store, question, { kind: 'question_answered', missionId: question.mission_id, requestId, answer: text });
    await tx.publish({
      type: 'question.answered', sessionId: question.session_id, agentId: question.agent_id,
      recipients: [question.owner_user_id, question.asked_of], data: { request_id: requestId },
    });
    return { request_id: requestId, ok: true, accepted: true } satisfies AnswerResult;
  });
}

/** Whether someone asked on another member's mission is still a member of the agent's workspace. */
async function isMemberOfAgentWorkspace(deps: MissionsDeps, userId: string, agentId: string): Promise<boolean> {
  const row = await deps.store.db.selectFrom('agents')
    .innerJoin('memberships', 'memberships.workspace_id', 'agents.workspace_id')
    .select('agents.id').where('agents.id', '=', agentId).where('memberships.user_id', '=', userId)
    .executeTakeFirst();
  return row !== undefined;
}
