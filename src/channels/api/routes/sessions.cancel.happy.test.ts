import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import { allEvents, cancelSession, eventsOf, sessionStatus } from '../../../testing/feed.ts';
import { startTestApp, type TestApp, type TestUser } from '../../../testing/harness.ts';
import {
  answerOne, askQuestion, decideOne, draftAction, listActions, listQuestions, memberOfOwnersWorkspace, unique,
} from '../../../testing/missions.ts';

/** §9.4 POST /sessions/{id}/cancel: the session's queued and running messages stop, and what its missions wait on closes. */
let t: TestApp;
// The ceiling is the waiting sends' wait: a send that the cancel failed to wake would answer 202 after it.
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000, duplicateWindowMs: 0 }); });
after(async () => { await t.close(); });

type Auth = Pick<TestUser, 'auth'>;
const turnsOf = async (u: Auth, sessionId: string) =>
  (await transcript(t, u, sessionId, 'limit=200')).json().messages.map((m: { role: string; text: string; error?: string }) => [m.role, m.text, m.error ?? null]);

/** The user's session other than `known`, once its send has created it. Bounded. */
async function newSessionOf(userId: string, known: string): Promise<{ session_id: string }> {
  for (let i = 0; i < 400; i++) {
    const { sessions } = await t.runtime.services.conversations.listSessionsPage(userId);
    const created = sessions.find((s) => s.session_id !== known);
    if (created) return created;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.fail('the send never created its session');
}

test('a queued message: it leaves the agent\'s line, its waiting send is answered Cancelled., with its turn and its event; the running one elsewhere goes on', async () => {
  const u = await t.userWithAgent();
  const running = (await send(t, u, { text: '!sleep 60000' }, { Prefer: 'wait=0' })).json();
  // Another session of the same agent: its message waits behind the sleep, and its send waits with it.
  const waiting = send(t, u, { text: 'queued behind', agent_id: u.agentId });
  const queuedSession = await newSessionOf(u.id, running.session_id);
  await sessionStatus(t, u, queuedSession.session_id, 'queued');

  const cancelled = await cancelSession(t, u, queuedSession.session_id);
  assert.equal(cancelled.statusCode, 200);
  assert.deepEqual(cancelled.json(), { session_id: queuedSession.session_id, cancelled: 1 });
  const answered = await waiting;
  assert.equal(answered.statusCode, 200);
  const body = answered.json();
  assert.equal(body.status, 'completed');
  assert.equal(body.reply, 'Cancelled.');
  assert.equal(body.error, 'cancelled');
  const page = (await transcript(t, u, queuedSession.session_id)).json();
  assert.equal(page.status, 'idle');
  assert.deepEqual(page.messages.map((m: { role: string; text: string; ts: string; error?: string }) => [m.role, m.text, m.ts, m.error ?? null]), [
    ['user', 'queued behind', body.message_ts, null], ['agent', 'Cancelled.', body.reply_ts, 'cancelled'],
  ]);
  assert.deepEqual(await eventsOf(t, u, queuedSession.session_id), [['turn.cancelled', { ts: body.message_ts }]]);

  // The sleep in the other session is still running, untouched.
  assert.equal((await transcript(t, u, running.session_id)).json().status, 'processing');
  assert.deepEqual((await cancelSession(t, u, running.session_id)).json(), { session_id: running.session_id, cancelled: 1 });
});

test('the running turn: stopped at once, its waiting send answered 200 Cancelled. with its reply_ts; the agent\'s line moves on', async () => {
  const u = await t.userWithAgent();
  const first = (await send(t, u, { text: 'before the sleep' })).json();
  const waiting = send(t, u, { text: '!sleep 60000', session_id: first.session_id });
  await sessionStatus(t, u, first.session_id, 'processing');
  assert.deepEqual((await cancelSession(t, u, first.session_id)).json(), { session_id: first.session_id, cancelled: 1 });
  const answered = await waiting;
  assert.equal(answered.statusCode, 200, 'woken by the cancel, not by the end of its wait (202)');
  const body = answered.json();
  assert.deepEqual({ status: body.status, reply: body.reply, error: body.error, awaiting: body.awaiting },
    { status: 'completed', reply: 'Cancelled.', error: 'cancelled', awaiting: [] });
  assert.deepEqual(await turnsOf(u, first.session_id), [
    ['user', 'before the sleep', null], ['agent', 'You said: before the sleep', null], ['user', '!sleep 60000', null], ['agent', 'Cancelled.', 'cancelled'],
  ]);
  const cancelledTurn = (await transcript(t, u, first.session_id, `after=${encodeURIComponent(body.message_ts)}`)).json().messages[0];
  assert.equal(cancelledTurn.ts, body.reply_ts);

  // The agent is free again: a new session is answered at once (a sleep still running would hold it 60 s).
  const next = await send(t, u, { text: 'after the cancel', agent_id: u.agentId });
  assert.equal(next.statusCode, 200);
  assert.equal(next.json().reply, 'You said: after the cancel');
  // And the cancelled session goes on too.
  assert.equal((await send(t, u, { text: 'still here', session_id: first.session_id })).json().reply, 'You said: still here');
  // One turn.cancelled, with the cancelled message's ts; its Cancelled. turn is no turn.failed.
  assert.deepEqual((await eventsOf(t, u, first.session_id)).map(([type, data]) => [type, type === 'turn.completed' ? data.text : data]), [
    ['turn.completed', 'You said: before the sleep'],
    ['turn.cancelled', { ts: body.message_ts }],
    ['turn.completed', 'You said: still here'],
  ]);
});

test('the running message and those queued behind it in the session: each cancelled, counted, with its own turn and event, oldest first', async () => {
  const u = await t.userWithAgent();
  const sent = [(await send(t, u, { text: '!sleep 60000' }, { Prefer: 'wait=0' })).json()];
  for (const text of ['second', 'third']) sent.push((await send(t, u, { text, session_id: sent[0].session_id }, { Prefer: 'wait=0' })).json());
  assert.deepEqual(sent.map((s) => s.status), ['processing', 'queued', 'queued']);
  const sessionId = sent[0].session_id;
  assert.deepEqual((await cancelSession(t, u, sessionId)).json(), { session_id: sessionId, cancelled: 3 });
  assert.deepEqual(await turnsOf(u, sessionId), [
    ['user', '!sleep 60000', null], ['user', 'second', null], ['user', 'third', null],
    ['agent', 'Cancelled.', 'cancelled'], ['agent', 'Cancelled.', 'cancelled'], ['agent', 'Cancelled.', 'cancelled'],
  ]);
  assert.deepEqual(await eventsOf(t, u, sessionId), sent.map((s) => ['turn.cancelled', { ts: s.message_ts }]));
  assert.equal((await transcript(t, u, sessionId)).json().status, 'idle');
});

test('an idle session: cancelled 0, and nothing is written', async () => {
  const u = await t.userWithAgent();
  const sent = (await send(t, u, { text: 'all done' })).json();
  const before = { turns: await turnsOf(u, sent.session_id), events: await allEvents(t, u) };
  const res = await cancelSession(t, u, sent.session_id);
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { session_id: sent.session_id, cancelled: 0 });
  assert.deepEqual({ turns: await turnsOf(u, sent.session_id), events: await allEvents(t, u) }, before);
});

test('the session\'s open actions and questions close: no longer listed, settling gives already_settled / already_answered, told as action.settled cancelled and question.closed', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const action = await draftAction(t, owner, 'email', unique('Never sent'));
  const question = await askQuestion(t, owner, 'text', unique('Never answered?'), { target: action.sessionId });
  const ofMember = await askQuestion(t, owner, 'yesno', unique('Member, never answered?'), { of: member.email, target: action.sessionId });
  const elsewhere = await draftAction(t, owner, 'email', unique('Another session\'s'), { agentId: owner.agentId });

  assert.deepEqual((await cancelSession(t, owner, action.sessionId)).json(), { session_id: action.sessionId, cancelled: 0 });
  assert.deepEqual((await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id), [elsewhere.operationId]);
  assert.deepEqual((await listQuestions(t, owner)).json().questions, []);
  assert.deepEqual((await listQuestions(t, member)).json().questions, []);
  assert.equal((await decideOne(t, owner, { operation_id: action.operationId, decision: 'approve' })).error.code, 'already_settled');
  assert.equal((await answerOne(t, owner, question.requestId, 'too late')).error.code, 'already_answered');
  assert.equal((await answerOne(t, member, ofMember.requestId, 'yes')).error.code, 'already_answered');

  const closing = (await eventsOf(t, owner, action.sessionId)).filter(([type]) => type === 'action.settled' || type === 'question.closed');
  assert.deepEqual(closing, [
    ['action.settled', { operation_id: action.operationId, outcome: 'cancelled' }],
    ['question.closed', { request_id: question.requestId }],
    ['question.closed', { request_id: ofMember.requestId }],
  ]);
  assert.deepEqual((await allEvents(t, member)).map((e) => [e.type, e.data.request_id]), [
    ['question.opened', ofMember.requestId], ['question.closed', ofMember.requestId],
  ]);
  // Nothing ran for them, and the session takes messages as before.
  assert.equal((await send(t, owner, { text: 'carry on', session_id: action.sessionId })).json().reply, 'You said: carry on');
  const continuations = await t.runtime.store.db.selectFrom('jobs').select('id').where('session_id', '=', action.sessionId).where('kind', '=', 'continuation').execute();
  assert.deepEqual(continuations, []);
});
