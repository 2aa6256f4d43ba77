import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { newId } from '../../domain/ids.ts';
import { startTestApp, type TestApp } from '../../testing/harness.ts';
import {
  agentTexts, answerOne, decideOne, draftAction, listQuestions, queueDrained, sendNoWait, settledTranscript, unique,
} from '../../testing/missions.ts';

/**
 * A mission's life: its continuations wait in the agent's one FIFO line like any other work,
 * and it ends only when nothing in it is still open.
 */
let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('a continuation takes its place in the agent\'s FIFO line: behind work queued before the decision, ahead of work queued after', async () => {
  const owner = await t.userWithAgent();
  const summary = unique('In line');
  const drafted = await draftAction(t, owner, 'email', summary);
  // Keep the agent busy, then queue one message, then the decision, then another message.
  const busyText = unique('!sleep 1000 busy');
  const beforeText = unique('queued before the decision');
  const afterText = unique('queued after the decision');
  await sendNoWait(t, owner, busyText, { agentId: owner.agentId });
  const before = await sendNoWait(t, owner, beforeText, { agentId: owner.agentId });
  assert.equal(before.status, 'queued', 'the agent was busy when the first message arrived');
  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'approve' })).outcome, 'approved');
  const afterIt = await sendNoWait(t, owner, afterText, drafted.sessionId);
  assert.equal(afterIt.status, 'queued');
  await queueDrained(t);

  // The order the agent worked in is the order its replies were written (one turn at a time).
  const jobs = await t.runtime.store.db.selectFrom('jobs').innerJoin('turns', 'turns.id', 'jobs.reply_turn_id')
    .select(['jobs.kind', 'jobs.payload', 'turns.text']).where('jobs.agent_id', '=', owner.agentId).orderBy('turns.id').execute();
  const worked = jobs.map((j) => (j.kind === 'continuation' ? `continuation: ${j.text}` : (JSON.parse(j.payload) as { text: string }).text));
  assert.deepEqual(worked, [`!action email ${summary}`, busyText, beforeText, `continuation: Done: ${summary}`, afterText]);
});

test('a mission with another open item does not end when one continuation drafts nothing new; it ends with the last one', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'email', unique('One of two'));
  const { db } = t.runtime.store;
  const action = await db.selectFrom('actions').selectAll().where('id', '=', drafted.operationId).executeTakeFirstOrThrow();
  // A brain may draft an action and a question at once (BrainResult allows both): this mission
  // gets its question as a finishing transaction would write it.
  const requestId = newId('question');
  await db.insertInto('questions').values({
    id: requestId, mission_id: action.mission_id, session_id: action.session_id, agent_id: action.agent_id,
    owner_user_id: owner.id, asked_of: owner.id, text: 'And the subject line?', answer_type: 'text',
    status: 'open', answer: null, created_at: new Date().toISOString(), answered_at: null,
  }).execute();
  const missionStatus = async () => (await db.selectFrom('missions').select('status').where('id', '=', action.mission_id).executeTakeFirstOrThrow()).status;

  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'reject', reason: 'shorter' })).ok, true);
  const afterRejection = await settledTranscript(t, owner, drafted.sessionId, 2);
  assert.deepEqual(agentTexts(afterRejection).slice(1), ['Re-planned: shorter']);
  assert.equal(await missionStatus(), 'waiting', 'the question is still open');
  assert.deepEqual((await listQuestions(t, owner)).json().questions.map((q: { request_id: string }) => q.request_id), [requestId]);

  assert.equal((await answerOne(t, owner, requestId, 'Hello')).accepted, true);
  const atTheEnd = await settledTranscript(t, owner, drafted.sessionId, 3);
  assert.deepEqual(agentTexts(atTheEnd).slice(2), ['Noted: Hello']);
  assert.equal(await missionStatus(), 'done');
});

test('a rejection without a reason stops the mission only once nothing else in it is open', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'email', unique('Stop me'));
  const { db } = t.runtime.store;
  const action = await db.selectFrom('actions').selectAll().where('id', '=', drafted.operationId).executeTakeFirstOrThrow();
  const second = newId('action');
  await db.insertInto('actions').values({
    id: second, mission_id: action.mission_id, session_id: action.session_id, agent_id: action.agent_id, owner_user_id: owner.id,
    kind: 'sms', summary: 'Text them too', details: '{}', status: 'pending', decision: null, reason: null,
    created_at: new Date().toISOString(), decided_at: null,
  }).execute();
  const missionStatus = async () => (await db.selectFrom('missions').select('status').where('id', '=', action.mission_id).executeTakeFirstOrThrow()).status;

  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'reject' })).ok, true);
  await queueDrained(t);
  assert.equal(await missionStatus(), 'waiting');
  assert.equal((await decideOne(t, owner, { operation_id: second, decision: 'reject' })).ok, true);
  const messages = await settledTranscript(t, owner, drafted.sessionId, 3);
  assert.deepEqual(agentTexts(messages).slice(1), ['Stopped.', 'Stopped.']);
  assert.equal(await missionStatus(), 'stopped');
});
