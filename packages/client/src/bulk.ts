import type { Client } from 'openapi-fetch';
import { BulkError } from './errors.ts';
import type { paths } from './generated/openapi.ts';
import { API_BASE, unwrap } from './api.ts';
import type { Answer, AnswerResult, Decision, DecisionResult, OpenQuestion, PendingAction } from './types.ts';

/**
 * The bulk calls answer 200 with one result per entry, some of which may have failed. By
 * default they are returned as they are; `{ strict: true }` throws a BulkError naming the failed
 * entries (the others were applied all the same).
 */
export interface BulkOptions {
  strict?: boolean;
  signal?: AbortSignal;
}

export interface ActionsApi {
  /** Every action awaiting your decision, oldest first (of one session with `sessionId`). */
  list(options?: { sessionId?: string; signal?: AbortSignal }): Promise<PendingAction[]>;
  approve(operationIds: string | string[], options?: BulkOptions): Promise<DecisionResult[]>;
  /** Approves the action and every other pending one of its kind for the same agent. */
  approveSameType(operationIds: string | string[], options?: BulkOptions): Promise<DecisionResult[]>;
  /** With a reason the agent re-plans around the refusal; without one the mission stops. */
  reject(operationIds: string | string[], reason?: string, options?: BulkOptions): Promise<DecisionResult[]>;
  /** Any mix of decisions, 1–100 of them. */
  decide(decisions: Decision[], options?: BulkOptions): Promise<DecisionResult[]>;
}

export interface QuestionsApi {
  /** Open questions put to you or on your missions, oldest first. */
  list(options?: { signal?: AbortSignal }): Promise<OpenQuestion[]>;
  /** One answer; strict mode also counts an answer that was not accepted (its `reason` says why) as failed. */
  answer(requestId: string, text: string, options?: BulkOptions): Promise<AnswerResult>;
  answerAll(answers: Answer[], options?: BulkOptions): Promise<AnswerResult[]>;
}

function strictly<R extends DecisionResult | AnswerResult>(results: R[], options: BulkOptions | undefined): R[] {
  if (!options?.strict) return results;
  const failed = results.filter((result) => !result.ok || ('accepted' in result && !result.accepted));
  if (failed.length > 0) throw new BulkError(results, failed);
  return results;
}

const ids = (operationIds: string | string[]) => (typeof operationIds === 'string' ? [operationIds] : operationIds);

export function bulkActions(api: Client<paths>): ActionsApi {
  const decide = async (decisions: Decision[], options?: BulkOptions) =>
    strictly((await unwrap(api.POST(`${API_BASE}/actions/decisions`, { body: decisions, signal: options?.signal }))).results, options);
  return {
    list: async ({ sessionId, signal } = {}) =>
      (await unwrap(api.GET(`${API_BASE}/actions`, { params: { query: sessionId ? { session_id: sessionId } : {} }, signal }))).actions,
    approve: (operationIds, options) => decide(ids(operationIds).map((id) => ({ operation_id: id, decision: 'approve' })), options),
    approveSameType: (operationIds, options) =>
      decide(ids(operationIds).map((id) => ({ operation_id: id, decision: 'approve_same_type' })), options),
    reject: (operationIds, reason, options) =>
      decide(ids(operationIds).map((id) => ({ operation_id: id, decision: 'reject', ...(reason ? { reason } : {}) })), options),
    decide,
  };
}

export function bulkQuestions(api: Client<paths>): QuestionsApi {
  const answerAll = async (answers: Answer[], options?: BulkOptions) =>
    strictly((await unwrap(api.POST(`${API_BASE}/questions/answers`, { body: answers, signal: options?.signal }))).results, options);
  return {
    list: async ({ signal } = {}) => (await unwrap(api.GET(`${API_BASE}/questions`, { signal }))).questions,
    answer: async (requestId, text, options) => (await answerAll([{ request_id: requestId, text }], options))[0]!,
    answerAll,
  };
}
