import assert from 'node:assert/strict';
import { sql } from 'kysely';
import type { LightMyRequestResponse } from 'fastify';
import { API, type TestApp, type TestUser } from './harness.ts';

/**
 * Helpers for the missions tests (contract §5, §6), all through the real HTTP API: send a
 * directive to the built-in agent, pick the operation_id / request_id out of its reply, settle
 * it, and read the transcript until the continuation turn is there.
 */
type Auth = Pick<TestUser, 'auth'>;

export interface Sent {
  sessionId: string;
  reply: string;
}

let counter = 0;
/** A summary no other message in the test run repeats (the duplicate window looks at text). */
export const unique = (text: string): string => `${text} #${++counter}-${process.pid}`;

/** Where a message goes: a session id, or `{ agentId }` for a new session with that agent. */
export type Target = string | { agentId: string } | undefined;

export async function send(t: TestApp, user: Auth, text: string, target?: Target): Promise<Sent> {
  const res = await t.inject({
    method: 'POST', url: `${API}/messages`, headers: user.auth,
    payload: typeof target === 'string' ? { text, session_id: target } : target ? { text, agent_id: target.agentId } : { text },
  });
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  assert.equal(body.status, 'completed', res.body);
  return { sessionId: body.session_id, reply: body.reply };
}

/** `!action <kind> <summary>`: the drafted action's operation_id and its session. */
export async function draftAction(t: TestApp, user: Auth, kind: string, summary: string, target?: Target) {
  const sent = await send(t, user, `!action ${kind} ${summary}`, target);
  const operationId = /\b(op_[A-Za-z0-9]+)/.exec(sent.reply)?.[1];
  assert.ok(operationId, `no operation_id in: ${sent.reply}`);
  return { ...sent, operationId };
}

/** `!ask <type> <question>` or `!ask-user <email> <type> <question>`: the request_id and session. */
export async function askQuestion(t: TestApp, user: Auth, type: string, question: string, options: { of?: string; target?: Target } = {}) {
  const text = options.of ? `!ask-user ${options.of} ${type} ${question}` : `!ask ${type} ${question}`;
  const sent = await send(t, user, text, options.target);
  const requestId = /\b(req_[A-Za-z0-9]+)/.exec(sent.reply)?.[1];
  assert.ok(requestId, `no request_id in: ${sent.reply}`);
  return { ...sent, requestId };
}

export const listActions = (t: TestApp, user: Auth, query = '') =>
  t.inject({ method: 'GET', url: `${API}/actions${query}`, headers: user.auth });

export const listQuestions = (t: TestApp, user: Auth, query = '') =>
  t.inject({ method: 'GET', url: `${API}/questions${query}`, headers: user.auth });

export const postDecisions = (t: TestApp, user: Auth, body: unknown): Promise<LightMyRequestResponse> =>
  t.inject({ method: 'POST', url: `${API}/actions/decisions`, headers: { ...user.auth, 'content-type': 'application/json' }, payload: JSON.stringify(body) });

export const postAnswers = (t: TestApp, user: Auth, body: unknown): Promise<LightMyRequestResponse> =>
  t.inject({ method: 'POST', url: `${API}/questions/answers`, headers: { ...user.auth, 'content-type': 'application/json' }, payload: JSON.stringify(body) });

/** One decision, asserting a 200 with one result; returns that result. */
export async function decideOne(t: TestApp, user: Auth, entry: Record<string, unknown>) {
  const res = await postDecisions(t, user, [entry]);
  assert.equal(res.statusCode, 200, res.body);
  const { results } = res.json();
  assert.equal(results.length, 1);
  return results[0];
}

export async function answerOne(t: TestApp, user: Auth, requestId: string, text: string) {
  const res = await postAnswers(t, user, [{ request_id: requestId, text }]);
  assert.equal(res.statusCode, 200, res.body);
  const { results } = res.json();
  assert.equal(results.length, 1);
  return results[0];
}

export interface TranscriptTurn {
  role: 'user' | 'agent';
  text: string;
  ts: string;
  error?: string;
}

export async function transcript(t: TestApp, user: Auth, sessionId: string): Promise<{ status: string; messages: TranscriptTurn[] }> {
  const res = await t.inject({ method: 'GET', url: `${API}/sessions/${sessionId}/messages?limit=200`, headers: user.auth });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/**
 * The transcript once the session is idle (no queued or running work) and holds at least
 * `agentTurns` agent turns. Bounded: fails the test instead of hanging.
 */
export async function settledTranscript(t: TestApp, user: Auth, sessionId: string, agentTurns: number): Promise<TranscriptTurn[]> {
  let last: { status: string; messages: TranscriptTurn[] } | undefined;
  for (let i = 0; i < 400; i++) {
    last = await transcript(t, user, sessionId);
    if (last.status === 'idle' && last.messages.filter((m) => m.role === 'agent').length >= agentTurns) return last.messages;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  assert.fail(`session ${sessionId} did not settle with ${agentTurns} agent turns: ${JSON.stringify(last)}`);
}

export const agentTexts = (messages: TranscriptTurn[]): string[] => messages.filter((m) => m.role === 'agent').map((m) => m.text);

/** A member (role member) of the owner's personal workspace, where the owner's agent lives. */
export async function memberOfOwnersWorkspace(t: TestApp, owner: Pick<TestUser, 'id'>): Promise<TestUser & { workspaceId: string }> {
  const member = await t.user();
  const workspaceId = await t.runtime.services.accounts.personalWorkspaceId(owner.id);
  await t.runtime.services.accounts.addMember({ workspaceId, email: member.email, role: 'member' });
  return { ...member, workspaceId };
}

/** POST /messages with `Prefer: wait=0`: answers at once (202 processing/queued, or 200); its body. */
export async function sendNoWait(t: TestApp, user: Auth, text: string, target?: Target): Promise<{ status: string; session_id: string }> {
  const res = await t.inject({
    method: 'POST', url: `${API}/messages`, headers: { ...user.auth, prefer: 'wait=0' },
    payload: typeof target === 'string' ? { text, session_id: target } : target ? { text, agent_id: target.agentId } : { text },
  });
  assert.ok(res.statusCode === 200 || res.statusCode === 202, res.body);
  return res.json();
}

/** Waits until no job in t's database is queued or running. Bounded: fails the test instead of hanging. */
export async function queueDrained(t: TestApp): Promise<void> {
  for (let i = 0; i < 600; i++) {
    // The condition as a literal, like the queue's own: SQLite then reads only the open jobs' index.
    const open = await t.runtime.store.db.selectFrom('jobs').select('id').where(sql<boolean>`status in ('queued', 'running')`).execute();
    if (open.length === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  assert.fail('jobs were still queued or running');
}

/** The statuses of an action and of its mission (a plain object: node:sqlite rows have a null prototype). */
export async function actionState(t: TestApp, operationId: string): Promise<{ action: string; mission: string }> {
  const row = await t.runtime.store.db.selectFrom('actions').innerJoin('missions', 'missions.id', 'actions.mission_id')
    .select(['actions.status as action', 'missions.status as mission']).where('actions.id', '=', operationId).executeTakeFirstOrThrow();
  return { action: row.action, mission: row.mission };
}
