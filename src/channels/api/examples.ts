import { EXAMPLE_IDS } from '../../domain/ids.ts';
import { Problem, PROBLEMS, type ProblemCode } from '../../domain/problems.ts';
import type { SendResult, TranscriptResult } from '../../services/conversations/schemas.ts';
import type { CancelResult } from '../../services/conversations/cancelling.ts';
import type { AnswerResults, DecisionResults, OpenQuestionList, PendingActionList } from '../../services/missions/schemas.ts';
import type { FeedEvent } from '../../domain/feed-events.ts';
import { problemBody } from '../problem-reply.ts';

/**
 * The example bodies of the OpenAPI document (the explorer at /docs shows them): each one a body
 * the server gives, typed by the shape it answers with, so that an example cannot drift from it.
 * Problem examples are made from the response's status and the code its description names first.
 */

const SESSION = 'ses_0VboFtAGbXu5Jn2B6YrW4Zdv7kq1Ma';
const MISSION = 'msn_0VboFtAGk3Qe8JrT1nVb6Xw2Ls9HdQ';
const USER = 'usr_0VboFtADq8Rr2Ls7Vn4Xe1Kj6Hb3Wp';
const TS = ['2026-11-22T12:34:56.789012Z', '2026-11-22T12:34:57.104233Z', '2026-11-22T12:35:02.511870Z'] as const;
const CREATED = '2026-11-22T12:34:57.104Z';
const AGENT = { agent_id: EXAMPLE_IDS.agent, name: 'Helper', workspace_id: EXAMPLE_IDS.workspace };

const completed: SendResult = {
  session_id: SESSION, status: 'completed', agent_id: EXAMPLE_IDS.agent, message_ts: TS[0],
  reply: 'You said: Summarise my unread email.', reply_ts: TS[1], awaiting: [],
};
const processing: SendResult = { session_id: SESSION, status: 'processing', agent_id: EXAMPLE_IDS.agent, message_ts: TS[0], awaiting: [] };
const transcript: TranscriptResult = {
  session_id: SESSION, agent_id: EXAMPLE_IDS.agent, status: 'idle', has_more: false,
  messages: [
    { role: 'user', text: '!action email Send the report', ts: TS[0] },
    { role: 'agent', text: `I need your permission to run "email": Send the report (operation_id ${EXAMPLE_IDS.action}). Approve or reject it.`, ts: TS[1] },
  ],
  awaiting: [{ type: 'action', operation_id: EXAMPLE_IDS.action, kind: 'email', summary: 'Send the report' }],
};
const actions: PendingActionList = {
  actions: [{
    operation_id: EXAMPLE_IDS.action, kind: 'email', summary: 'Send the report', details: { to: 'team@example.com' },
    session_id: SESSION, agent_id: EXAMPLE_IDS.agent, mission_id: MISSION, created_at: CREATED,
  }],
  has_more: false,
};
const decisions: DecisionResults = { results: [{ operation_id: EXAMPLE_IDS.action, ok: true, outcome: 'approved', also_approved: [] }] };
const questions: OpenQuestionList = {
  questions: [{
    request_id: EXAMPLE_IDS.question, text: 'How many copies?', session_id: SESSION, agent_id: EXAMPLE_IDS.agent,
    mission_id: MISSION, answer_type: 'number', asked_of: USER, created_at: CREATED,
  }],
  has_more: false,
};
const answers: AnswerResults = {
  results: [{ request_id: EXAMPLE_IDS.question, ok: true, accepted: false, reason: 'A number is missing: answer with digits, e.g. 42 or 3.5.' }],
};
const events: { events: FeedEvent[]; has_more: boolean } = {
  events: [{
    id: 'evt_1043', type: 'turn.completed', created_at: CREATED, session_id: SESSION, agent_id: EXAMPLE_IDS.agent,
    data: { text: 'You said: Summarise my unread email.', ts: TS[1] },
  }],
  has_more: false,
};
const cancelled: CancelResult = { session_id: SESSION, cancelled: 1 };

/** Each operation's success examples, by status. */
export const SUCCESS_EXAMPLES: Record<string, Record<number, unknown>> = {
  listAgents: { 200: { agents: [AGENT] } },
  createAgent: { 201: AGENT },
  sendMessage: { 200: completed, 202: processing },
  readTranscript: { 200: transcript },
  listActions: { 200: actions },
  decideActions: { 200: decisions },
  listQuestions: { 200: questions },
  answerQuestions: { 200: answers },
  listEvents: { 200: events },
  cancelSession: { 200: cancelled },
};

/** What the server says of a code, where its title alone would say little. */
const DETAILS: Partial<Record<ProblemCode, string>> = {
  unauthorized: 'A valid API key is required: Authorization: Bearer ak_<keyId>_<secret>.',
  rate_limited: 'This key allows 60 requests per minute; retry in 12 s.',
  text_empty: '`text` is required and must be a non-blank string.',
  validation_failed: 'limit: must be an integer from 1 to 200',
  agent_failed: 'The agent could not process this message: its model could not be reached.',
  session_not_found: 'No such session.',
};

/** The code of a status when its description names none. */
const USUAL_CODE: Partial<Record<number, ProblemCode>> = { 403: 'forbidden', 404: 'not_found', 422: 'validation_failed', 429: 'rate_limited' };

/** The code a problem response's description names first, or the usual code of that status. */
function problemCodeFor(status: number, description: string): ProblemCode | undefined {
  const ofStatus = (Object.keys(PROBLEMS) as ProblemCode[]).filter((code) => PROBLEMS[code].status === status);
  const named = ofStatus
    .map((code) => ({ code, at: description.search(new RegExp(`\\b${code}\\b`)) }))
    .filter(({ at }) => at >= 0)
    .sort((a, b) => a.at - b.at)[0]?.code;
  return named ?? USUAL_CODE[status] ?? ofStatus[0];
}

/** A problem body as the server sends it for that status and code. */
export function problemExample(status: number, description: string): Record<string, unknown> | undefined {
  const code = problemCodeFor(status, description);
  if (!code) return undefined;
  const extra = code === 'agent_failed' ? { session_id: SESSION, message_ts: TS[0] }
    : code === 'validation_failed' ? { errors: [{ path: 'limit', message: 'must be an integer from 1 to 200' }] }
    : {};
  return problemBody(new Problem(code, DETAILS[code] ?? `${PROBLEMS[code].title}.`, extra), '5f0c6a2e-8d1b-4c4e-9a57-3b2f1e0d9c8a');
}
