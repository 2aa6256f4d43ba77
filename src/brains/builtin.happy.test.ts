import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { agentTexts, listActions, listQuestions, send, settledTranscript, unique } from '../testing/missions.ts';
import { API, startTestApp, type TestApp } from '../testing/harness.ts';

/** §8: `!sleep <ms> [text]` handles the rest as a message of its own, directives included. */
let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('!sleep <ms> with no text replies "Slept <ms> ms."; with plain text it echoes the text', async () => {
  const u = await t.userWithAgent();
  assert.equal((await send(t, u, '!sleep 10')).reply, 'Slept 10 ms.');
  const text = unique('after a nap');
  assert.equal((await send(t, u, `!sleep 10 ${text}`)).reply, `You said: ${text}`);
});

test('!sleep <ms> !fail fails the turn after the sleep: 502 agent_failed, and an error turn in the transcript', async () => {
  const u = await t.userWithAgent();
  const res = await t.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text: unique('!sleep 10 !fail') } });
  assert.equal(res.statusCode, 502, res.body);
  const problem = res.json();
  assert.equal(problem.code, 'agent_failed');
  const messages = await settledTranscript(t, u, problem.session_id, 1);
  assert.equal(messages.at(-1)!.error, 'agent_failed');
});

test('!sleep <ms> !action and !sleep <ms> !ask draft an action and open a question after the sleep', async () => {
  const u = await t.userWithAgent();
  const summary = unique('Send it later');
  const drafted = await send(t, u, `!sleep 10 !action email ${summary}`);
  assert.match(drafted.reply, /operation_id op_/);
  assert.deepEqual((await listActions(t, u)).json().actions.map((a: { summary: string }) => a.summary), [summary]);
  const question = unique('Which day?');
  const asked = await send(t, u, `!sleep 10 !ask date ${question}`, drafted.sessionId);
  assert.match(asked.reply, /request_id req_/);
  assert.deepEqual((await listQuestions(t, u)).json().questions.map((q: { text: string; answer_type: string }) => [q.text, q.answer_type]), [[question, 'date']]);
});

test('!sleep <ms> !sleep <ms> <text> nests', async () => {
  const u = await t.userWithAgent();
  const text = unique('twice asleep');
  const sent = await send(t, u, `!sleep 5 !sleep 5 ${text}`);
  assert.equal(sent.reply, `You said: ${text}`);
  assert.equal(agentTexts(await settledTranscript(t, u, sent.sessionId, 1)).length, 1);
});
