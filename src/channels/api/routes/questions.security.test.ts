import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  agentTexts, answerOne, askQuestion, listQuestions, memberOfOwnersWorkspace, postAnswers, settledTranscript, unique,
} from '../../../testing/missions.ts';
import { transcript } from '../../../testing/conversation.ts';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('a stranger sees none of the owner\'s questions and gets exactly what a missing id gets', async () => {
  const owner = await t.userWithAgent();
  const asked = await askQuestion(t, owner, 'text', unique('Secret?'));
  const stranger = await t.userWithAgent();
  assert.deepEqual((await listQuestions(t, stranger)).json(), { questions: [], has_more: false });
  const theirs = await answerOne(t, stranger, asked.requestId, 'hello');
  const missing = await answerOne(t, stranger, 'req_doesnotexist0000000000', 'hello');
  assert.equal(theirs.error.code, 'not_found');
  assert.deepEqual(theirs.error, missing.error);
  assert.equal((await listQuestions(t, owner)).json().questions.length, 1);
});

test('a member who was not asked neither sees nor answers the owner\'s own question', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const asked = await askQuestion(t, owner, 'text', unique('For the owner?'));
  assert.deepEqual((await listQuestions(t, member)).json(), { questions: [], has_more: false });
  assert.equal((await answerOne(t, member, asked.requestId, 'me')).error.code, 'not_found');
});

test('a member asked who then leaves the workspace no longer sees or answers it; the owner still can', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const asked = await askQuestion(t, owner, 'text', unique('Before you go?'), { of: member.email });
  await t.runtime.store.db.deleteFrom('memberships').where('workspace_id', '=', member.workspaceId).where('user_id', '=', member.id).execute();
  assert.deepEqual((await listQuestions(t, member)).json(), { questions: [], has_more: false });
  assert.equal((await answerOne(t, member, asked.requestId, 'bye')).error.code, 'not_found');
  assert.deepEqual((await listQuestions(t, owner)).json().questions.map((q: { request_id: string }) => q.request_id), [asked.requestId]);
  assert.equal((await answerOne(t, owner, asked.requestId, 'answered for them')).accepted, true);
});

test('the race: concurrent fitting answers from the owner and the member asked; exactly one is accepted, one turn', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const asked = await askQuestion(t, owner, 'number', unique('How many?'), { of: member.email });
  const responses = await Promise.all(Array.from({ length: 8 }, (_, i) =>
    postAnswers(t, i % 2 ? owner : member, [{ request_id: asked.requestId, text: String(i) }])));
  const results = responses.map((res) => {
    assert.equal(res.statusCode, 200, res.body);
    return res.json().results[0];
  });
  const accepted = results.filter((r) => r.ok && r.accepted);
  assert.equal(accepted.length, 1, JSON.stringify(results));
  assert.ok(results.filter((r) => !r.ok).every((r) => r.error.code === 'already_answered'), JSON.stringify(results));
  assert.equal(results.filter((r) => !r.ok).length, 7);

  const messages = await settledTranscript(t, owner, asked.sessionId, 2);
  const continuations = agentTexts(messages).slice(1);
  assert.equal(continuations.length, 1);
  const stored = await t.runtime.store.db.selectFrom('questions').select('answer').where('id', '=', asked.requestId).executeTakeFirstOrThrow();
  assert.equal(continuations[0], `Noted: ${stored.answer}`);
});

test('a member asked sees the question\'s session_id, but that transcript stays the owner\'s: 404 to the member', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const asked = await askQuestion(t, owner, 'text', unique('Whose session?'), { of: member.email });
  const [listed] = (await listQuestions(t, member)).json().questions;
  assert.equal(listed.session_id, asked.sessionId);
  const read = await transcript(t, member, asked.sessionId);
  assert.equal(read.statusCode, 404);
  assert.equal(read.json().code, 'session_not_found');
  assert.equal((await answerOne(t, member, asked.requestId, 'mine')).accepted, true);
});
