import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import { cancelSession } from '../../../testing/feed.ts';
import { startTestApp, type TestApp, type TestUser } from '../../../testing/harness.ts';
import {
  answerOne, askQuestion, decideOne, draftAction, memberOfOwnersWorkspace, settledTranscript, unique,
} from '../../../testing/missions.ts';

/** §9.2: the send result (every status) and the transcript say what the agent waits for in the session. */
let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000, duplicateWindowMs: 10_000 }); });
after(async () => { await t.close(); });

const awaitingOf = async (u: Pick<TestUser, 'auth'>, sessionId: string) => {
  const res = await transcript(t, u, sessionId);
  assert.equal(res.statusCode, 200, res.body);
  return res.json().awaiting;
};

test('the send result of every status carries awaiting, and so does the transcript', async () => {
  const u = await t.userWithAgent();
  const summary = unique('Email the minutes');
  const drafted = await send(t, u, { text: `!action email ${summary}` });
  assert.equal(drafted.statusCode, 200);
  const body = drafted.json();
  assert.equal(body.status, 'completed');
  const operationId = /\b(op_[A-Za-z0-9]+)/.exec(body.reply)![1];
  const pending = [{ type: 'action', operation_id: operationId, kind: 'email', summary }];
  assert.deepEqual(body.awaiting, pending, 'completed, with the action it drafted');

  // Long enough for three more sends to find it running.
  const sleep = unique('!sleep 3000');
  const processing = await send(t, u, { text: sleep, session_id: body.session_id }, { Prefer: 'wait=0' });
  assert.equal(processing.statusCode, 202);
  assert.equal(processing.json().status, 'processing');
  assert.deepEqual(processing.json().awaiting, pending, 'processing, the earlier action still pending');
  const queued = await send(t, u, { text: unique('behind the sleep'), session_id: body.session_id }, { Prefer: 'wait=0' });
  assert.equal(queued.json().status, 'queued');
  assert.deepEqual(queued.json().awaiting, pending);
  const duplicate = await send(t, u, { text: sleep, session_id: body.session_id }, { Prefer: 'wait=0' });
  assert.equal(duplicate.json().status, 'duplicate');
  assert.deepEqual(duplicate.json().awaiting, pending);
  assert.deepEqual(await awaitingOf(u, body.session_id), pending);
  await settledTranscript(t, u, body.session_id, 3);
  assert.deepEqual(await awaitingOf(u, body.session_id), pending, 'idle, and the agent still waits for a person');
});

test('a session with nothing open says awaiting: [] in the send result and the transcript', async () => {
  const u = await t.userWithAgent();
  const sent = (await send(t, u, { text: unique('nothing to decide') })).json();
  assert.deepEqual(sent.awaiting, []);
  assert.deepEqual(await awaitingOf(u, sent.session_id), []);
});

test('awaiting lists exactly the session\'s open actions and questions, oldest first, whatever their type, and not another session\'s', async () => {
  const u = await t.userWithAgent();
  const action = await draftAction(t, u, 'email', unique('First an action'));
  const question = await askQuestion(t, u, 'text', unique('Then a question?'), { target: action.sessionId });
  // Elsewhere, the other way round: a question first, then an action.
  const elsewhere = await askQuestion(t, u, 'yesno', unique('Elsewhere first?'), { target: { agentId: u.agentId } });
  const later = await draftAction(t, u, 'calendar', unique('Elsewhere second'), elsewhere.sessionId);

  const ids = (items: Array<{ operation_id?: string; request_id?: string }>) => items.map((item) => item.operation_id ?? item.request_id);
  const here = await awaitingOf(u, action.sessionId);
  assert.deepEqual(ids(here), [action.operationId, question.requestId]);
  assert.equal(here[1].type, 'question');
  assert.equal(here[1].answer_type, 'text');
  assert.match(here[1].text, /^Then a question\?/);
  assert.deepEqual(ids(await awaitingOf(u, elsewhere.sessionId)), [elsewhere.requestId, later.operationId]);

  // Settled, an item leaves the list; the others stay.
  assert.equal((await decideOne(t, u, { operation_id: action.operationId, decision: 'approve' })).ok, true);
  assert.deepEqual(ids(await awaitingOf(u, action.sessionId)), [question.requestId]);
  assert.equal((await answerOne(t, u, question.requestId, 'an answer')).accepted, true);
  assert.deepEqual(await awaitingOf(u, action.sessionId), []);
  await settledTranscript(t, u, action.sessionId, 4);
  assert.deepEqual(await awaitingOf(u, action.sessionId), []);
  assert.deepEqual(ids(await awaitingOf(u, elsewhere.sessionId)), [elsewhere.requestId, later.operationId], 'the other session\'s are untouched');
});

test('a question put to another member of the workspace is in the owner\'s awaiting (the owner may answer it too)', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const asked = await askQuestion(t, owner, 'yesno', unique('Can you sign?'), { of: member.email });
  assert.deepEqual((await awaitingOf(owner, asked.sessionId)).map((item: { request_id: string }) => item.request_id), [asked.requestId]);
});

test('cancelling the session empties awaiting', async () => {
  const u = await t.userWithAgent();
  const action = await draftAction(t, u, 'email', unique('Never to be sent'));
  await askQuestion(t, u, 'number', unique('How many?'), { target: action.sessionId });
  assert.equal((await awaitingOf(u, action.sessionId)).length, 2);
  const cancelled = await cancelSession(t, u, action.sessionId);
  assert.equal(cancelled.statusCode, 200);
  assert.deepEqual(await awaitingOf(u, action.sessionId), []);
  assert.deepEqual((await send(t, u, { text: unique('after the cancel'), session_id: action.sessionId })).json().awaiting, []);
});

test('awaiting lists only what the caller can settle: nothing once the caller has left the agent\'s workspace', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const target = { agentId: owner.agentId };
  const action = await draftAction(t, member, 'email', unique('Sent by a member'), target);
  const question = await askQuestion(t, member, 'text', unique('A member\'s question?'), { target: action.sessionId });
  const ids = (items: Array<{ operation_id?: string; request_id?: string }>) => items.map((item) => item.operation_id ?? item.request_id);
  assert.deepEqual(ids(await awaitingOf(member, action.sessionId)), [action.operationId, question.requestId]);
  await t.runtime.services.accounts.removeMember({ workspaceId: member.workspaceId, email: member.email });
  // The transcript stays the caller's to read, but what waits in it is no longer theirs to settle.
  assert.deepEqual(await awaitingOf(member, action.sessionId), []);
  assert.equal((await decideOne(t, member, { operation_id: action.operationId, decision: 'approve' })).error.code, 'not_found');
  assert.equal((await answerOne(t, member, question.requestId, 'too late')).error.code, 'not_found');
});
