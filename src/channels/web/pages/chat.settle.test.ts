import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';
import { signedUpWithAgent } from '../../../testing/web-client.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const JSON_ACCEPT = { accept: 'application/json' };

async function userIdOf(email: string): Promise<string> {
  return (await t.runtime.services.accounts.requireByEmail(email)).id;
}

async function idle(web: Awaited<ReturnType<typeof signedUpWithAgent>>['web'], sessionId: string) {
  for (let i = 0; i < 100; i++) {
    const read = (await web.get(`/conversations/${sessionId}/messages.json`, JSON_ACCEPT)).json();
    if (read.status === 'idle') return read;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail('the conversation went idle');
}

test('happy: a card of the chat settles its action without a script: back to the chat, which says what was done', async () => {
  const { web, agentId, email } = await signedUpWithAgent(t);
  const sent = await web.post('/chat', { agent_id: agentId, text: '!action email Send the report' });
  const chat = String(sent.headers.location);
  const sessionId = chat.split('=')[1]!;
  const { actions: [action] } = await t.runtime.services.missions.listActions(await userIdOf(email), { sessionId });
  await web.get(chat);
  const approved = await web.post(`/inbox/actions/${action!.operation_id}`, { decision: 'approve', back: chat });
  assert.equal(approved.statusCode, 303);
  assert.equal(approved.headers.location, `${chat}&done=approved&n=1`);
  const page = (await web.get(String(approved.headers.location))).body;
  assert.match(page, /<div class="chat-settled" role="status" data-settle-status><div class="notice notice-ok">Approved\. The agent carries on\.<\/div><\/div>/);
  const read = await idle(web, sessionId);
  assert.equal(read.messages.at(-1).text, 'Done: Send the report');
});

test('happy: with a script, a card posts and gets JSON: taken, or refused with the reason (the question stays open)', async () => {
  const { web, agentId, email } = await signedUpWithAgent(t);
  const sent = await web.post('/chat', { agent_id: agentId, text: '!ask yesno Proceed?' }, JSON_ACCEPT);
  const sessionId = sent.json().session_id;
  const { questions: [question] } = await t.runtime.services.missions.listQuestions(await userIdOf(email), { sessionId });
  const page = (await web.get(`/chat?session=${sessionId}`)).body;
  // A yes/no question is answered with a button of each.
  assert.match(page, /<div class="row" role="group" aria-labelledby="chat-req_[A-Za-z0-9]+-text"><button type="submit" name="text" value="yes" class="btn">Yes<span class="sr-only"> “Proceed\?”<\/span><\/button><button type="submit" name="text" value="no" class="btn btn-quiet">No/);
  const refused = await web.post(`/inbox/questions/${question!.request_id}`, { text: 'perhaps', back: `/chat?session=${sessionId}` }, JSON_ACCEPT);
  assert.equal(refused.statusCode, 422);
  assert.equal(refused.json().accepted, false);
  assert.match(refused.json().message, /^Not accepted: .*yes or no/i);
  assert.equal((await t.runtime.services.missions.listQuestions(await userIdOf(email), { sessionId })).questions.length, 1, 'still open');
  const taken = await web.post(`/inbox/questions/${question!.request_id}`, { text: 'yes' }, JSON_ACCEPT);
  assert.deepEqual(taken.json(), { ok: true, accepted: true, message: 'Answer accepted. The agent carries on.' });
  const again = await web.post(`/inbox/questions/${question!.request_id}`, { text: 'no' }, JSON_ACCEPT);
  assert.equal(again.statusCode, 409);
  assert.equal(again.json().message, 'This question was already answered.');
  assert.equal((await idle(web, sessionId)).messages.at(-1).text, 'Noted: yes');

  // A choice is a button for each option; a rejection with a reason re-plans.
  await web.post('/chat', { session_id: sessionId, text: '!ask choice:red|green Which colour?' });
  const choice = (await web.get(`/chat?session=${sessionId}`)).body;
  assert.match(choice, /value="red" class="btn">Red<span class="sr-only">[^<]*<\/span><\/button><button type="submit" name="text" value="green" class="btn btn-quiet">Green/);
  await web.post('/chat', { session_id: sessionId, text: '!action deploy Deploy it' });
  const { actions: [deploy] } = await t.runtime.services.missions.listActions(await userIdOf(email), { sessionId });
  const rejected = await web.post(`/inbox/actions/${deploy!.operation_id}`, { decision: 'reject', reason: 'not today' }, JSON_ACCEPT);
  assert.deepEqual(rejected.json(), { ok: true, outcome: 'rejected', message: 'Rejected. The agent has been told.' });
});

test('security: a card sends you back only to a chat of this site; another account\'s action is not settled', async () => {
  const { web, agentId, email } = await signedUpWithAgent(t);
  const sent = await web.post('/chat', { agent_id: agentId, text: '!action email Send it' });
  const sessionId = String(sent.headers.location).split('=')[1]!;
  const { actions: [action] } = await t.runtime.services.missions.listActions(await userIdOf(email), { sessionId });
  const other = await signedUpWithAgent(t);
  await other.web.get('/inbox');
  const theirs = await other.web.post(`/inbox/actions/${action!.operation_id}`, { decision: 'approve', back: `/chat?session=${sessionId}` });
  assert.match(String(theirs.headers.location), /^\/inbox\?error=not_found/);
  for (const back of ['https://evil.example/chat?session=ses_x', '//evil.example', '/chat?session=ses_x&next=//evil', '/account/keys']) {
    await web.get('/inbox');
    const res = await web.post(`/inbox/actions/${action!.operation_id}`, { decision: 'approve_same_type', back });
    assert.match(String(res.headers.location), /^\/inbox\?/, back);
    if (back === '/account/keys') break; // settled by now
  }
});

test('happy: a failed turn offers Send again, which is not taken for a duplicate; a second click is not a third try', async () => {
  const { web, agentId } = await signedUpWithAgent(t);
  const sent = await web.post('/chat', { agent_id: agentId, text: '!fail' });
  const chat = String(sent.headers.location);
  const sessionId = chat.split('=')[1]!;
  const page = (await web.get(chat)).body;
  const form = /<form method="post" action="\/chat" class="resend" data-resend>[\s\S]*?<\/form>/.exec(page)?.[0];
  assert.ok(form, 'the failed turn offers to send again');
  const field = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(form)![1]!;
  assert.equal(field('text'), '!fail');
  assert.equal(field('session_id'), sessionId);
  const retry = { session_id: sessionId, text: field('text'), retry_of: field('retry_of') };
  const first = await web.post('/chat', retry, JSON_ACCEPT);
  assert.notEqual(first.json().status, 'duplicate', 'within the duplicate window, yet a new turn');
  await web.post('/chat', retry, JSON_ACCEPT);
  const turns = (await idle(web, sessionId)).messages.filter((m: { role: string }) => m.role === 'user');
  assert.equal(turns.length, 2, 'the message, and one retry');
});

test('the chat lists the built-in agent\'s directives, open on a new chat; not with a model', async () => {
  const { web, agentId } = await signedUpWithAgent(t);
  const fresh = (await web.get('/chat')).body;
  assert.match(fresh, /<details class="chat-help" open>\s*<summary>Try the built-in agent<\/summary>/);
  for (const directive of ['!sleep', '!fail', '!action', '!ask ', '!ask-user']) assert.ok(fresh.includes(`<code>${directive}`), directive);
  const sent = await web.post('/chat', { agent_id: agentId, text: 'hi' });
  assert.match((await web.get(String(sent.headers.location))).body, /<details class="chat-help">/, 'closed once the chat has begun');
  const withModel = await startTestApp({ model: { provider: 'openai-compatible', name: 'm', baseUrl: 'http://127.0.0.1:9/v1', apiKey: null, timeoutMs: 1000, systemPrompt: null } });
  try {
    const other = await signedUpWithAgent(withModel);
    assert.doesNotMatch((await other.web.get('/chat')).body, /chat-help/);
  } finally {
    await withModel.close();
  }
});
