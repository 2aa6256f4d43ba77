import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';
import { signedUpWithAgent, WebClient } from '../../../testing/web-client.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const withAgent = (name?: string) => signedUpWithAgent(t, name);

test('happy: a chat message without JS goes through the pipeline and the reply is on the page', async () => {
  const { web, agentId } = await withAgent();
  const page = await web.get(`/chat?agent=${agentId}`);
  assert.match(page.body, new RegExp(`<option value="${agentId}" selected>Chatty</option>`));
  const sent = await web.post('/chat', { agent_id: agentId, text: 'hello there' });
  assert.equal(sent.statusCode, 303);
  const location = String(sent.headers.location);
  assert.match(location, /^\/chat\?session=ses_/);
  const chat = await web.get(location);
  assert.match(chat.body, /<div class="msg-text">hello there<\/div>/);
  assert.match(chat.body, /<div class="msg-text">You said: hello there<\/div>/);
  assert.match(chat.body, /badge-idle/);
  assert.doesNotMatch(chat.body, /http-equiv="refresh"/);

  const sessionId = location.split('=')[1]!;
  const row = await t.runtime.store.db.selectFrom('sessions').select('channel').where('id', '=', sessionId).executeTakeFirstOrThrow();
  assert.equal(row.channel, 'web', 'the session came through the web channel');

  // The form now continues the same session.
  assert.match(chat.body, new RegExp(`name="session_id" value="${sessionId}"`));
  await web.post('/chat', { session_id: sessionId, text: 'second' });
  const again = await web.get(location);
  assert.match(again.body, /You said: second/);
});

test('happy: with JS the post answers JSON at once, and the script reads the transcript after its last message', async () => {
  const { web, agentId } = await withAgent();
  await web.get('/chat');
  const res = await web.post('/chat', { agent_id: agentId, text: '!sleep 1000 slow one' }, { accept: 'application/json' });
  assert.equal(res.statusCode, 202);
  const body = res.json();
  assert.equal(body.status, 'processing');
  assert.match(body.session_id, /^ses_/);

  const running = await web.get(`/chat?session=${body.session_id}`);
  assert.match(running.body, /The agent is working on it/);
  // Without JS the page never reloads by itself (that would wipe a half-written message): it offers a link.
  assert.doesNotMatch(running.body, /http-equiv="refresh"/);
  assert.match(running.body, new RegExp(`<noscript><a href="/chat\\?session=${body.session_id}">Show the reply</a></noscript>`));

  let transcript: { status: string; messages: { role: string; text: string; ts: string }[] } | undefined;
  for (let i = 0; i < 50; i++) {
    const poll = await web.get(`/conversations/${body.session_id}/messages.json`, { accept: 'application/json' });
    assert.equal(poll.statusCode, 200);
    transcript = poll.json();
    if (transcript!.status === 'idle' && transcript!.messages.length === 2) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(transcript!.messages.map((m) => m.text), ['!sleep 1000 slow one', 'You said: slow one']);
  const after = await web.get(`/conversations/${body.session_id}/messages.json?after=${encodeURIComponent(transcript!.messages[0]!.ts)}`, { accept: 'application/json' });
  assert.deepEqual(after.json().messages.map((m: { text: string }) => m.text), ['You said: slow one']);
});

test('happy: what a conversation leaves waiting for you is named, each item in a card that settles it, until it is settled', async () => {
  const { web, agentId, email } = await withAgent();
  const userId = (await t.runtime.services.accounts.requireByEmail(email)).id;
  const sent = await web.post('/chat', { agent_id: agentId, text: '!action email Send the report' });
  const location = String(sent.headers.location);
  const sessionId = location.split('=')[1]!;
  const note = (body: string) => /<div class="notice notice-info chat-waiting" data-chat-waiting( hidden)?>[\s\S]*?<\/div>/.exec(body)?.[0] ?? '';
  const cards = (body: string) => /<div data-chat-awaiting>([\s\S]*?)<\/div>\s*<div class="chat-settled"/.exec(body)?.[1] ?? '';
  const chatBadge = (body: string) => /<span data-chat-badge>(<span class="badge [^"]+">[^<]*<\/span>)/.exec(body)?.[1];
  const { actions: [action] } = await t.runtime.services.missions.listActions(userId, { sessionId });
  const page = (await web.get(location)).body;
  const waiting = note(page);
  assert.doesNotMatch(waiting, / hidden>/);
  assert.match(waiting, /<strong>Waiting for you:<\/strong> <span data-chat-waiting-text>1 action to approve or reject<\/span>, below or in <a href="\/inbox">the inbox<\/a>\./);
  const actionCard = cards(page);
  assert.match(actionCard, /<span class="badge badge-kind">email<\/span> <h2 class="item-title">Send the report<\/h2>/);
  assert.match(actionCard, new RegExp(`<form method="post" action="/inbox/actions/${action!.operation_id}" class="decide row" data-settle>`));
  assert.match(actionCard, new RegExp(`<input type="hidden" name="back" value="/chat\\?session=${sessionId}">`));
  for (const decision of ['approve', 'approve_same_type']) assert.match(actionCard, new RegExp(`name="decision" value="${decision}"`));
  assert.match(actionCard, /<input type="hidden" name="decision" value="reject">/);
  assert.equal(chatBadge(page), '<span class="badge badge-waiting">waiting for you</span>');

  await web.post('/chat', { session_id: sessionId, text: '!ask number How many copies?' });
  const both = note((await web.get(location)).body);
  assert.match(both, /1 action to approve or reject and 1 question to answer/);
  const { questions: [question] } = await t.runtime.services.missions.listQuestions(userId, { sessionId });
  const bothCards = cards((await web.get(location)).body);
  assert.match(bothCards, new RegExp(`<form method="post" action="/inbox/questions/${question!.request_id}" class="answer" data-settle>`));
  assert.match(bothCards, /<h2 class="item-title" id="chat-req_[A-Za-z0-9]+-text">How many copies\?<\/h2>/);
  assert.match(bothCards, /name="text" type="text" required[^>]* inputmode="decimal">/);
  // The script reads it with the transcript, worded as the page words it.
  const read = (await web.get(`/conversations/${sessionId}/messages.json`, { accept: 'application/json' })).json();
  assert.deepEqual(read.awaiting.map((item: { type: string }) => item.type), ['action', 'question']);
  assert.equal(read.waiting_text, '1 action to approve or reject and 1 question to answer');
  assert.equal(read.awaiting_html, bothCards.replace(/name="_csrf" value="[^"]*"/g, `name="_csrf" value="${web.csrf}"`), 'the cards, as the page draws them');

  // While the agent works, the page says that, not "waiting for you".
  const busy = await web.post('/chat', { session_id: sessionId, text: '!sleep 1000 a moment' }, { accept: 'application/json' });
  assert.equal(busy.json().status, 'processing');
  const working = (await web.get(location)).body;
  assert.match(note(working), / hidden>/);
  assert.equal(cards(working), '', 'and no cards');
  assert.equal(chatBadge(working), '<span class="badge badge-processing">processing</span>');

  await t.runtime.services.missions.decide(userId, [{ operation_id: action!.operation_id, decision: 'reject' }]);
  await t.runtime.services.missions.answer(userId, [{ request_id: question!.request_id, text: '3' }]);
  let settled;
  for (let i = 0; i < 100; i++) {
    settled = (await web.get(`/conversations/${sessionId}/messages.json`, { accept: 'application/json' })).json();
    if (settled.status === 'idle') break;
    await new Promise((r) => setTimeout(r, 100)); // the outcomes' turns still run
  }
  assert.deepEqual(settled.awaiting, []);
  assert.equal(settled.waiting_text, '');
  const done = (await web.get(location)).body;
  assert.match(note(done), / hidden>/, 'nothing waits any more');
  assert.equal(chatBadge(done), '<span class="badge badge-idle">idle</span>');
});

test('happy: a message queued behind another shows the queued state', async () => {
  const { web, agentId } = await withAgent();
  await web.get('/chat');
  const first = await web.post('/chat', { agent_id: agentId, text: '!sleep 1500 first' }, { accept: 'application/json' });
  const second = await web.post('/chat', { agent_id: agentId, text: 'second, new session' }, { accept: 'application/json' });
  assert.equal(first.json().status, 'processing');
  assert.equal(second.json().status, 'queued');
  const page = await web.get(`/chat?session=${second.json().session_id}`);
  assert.match(page.body, /Queued: the agent is busy/);
  assert.match(page.body, /badge-queued/);
});

test('happy: conversations lists the sessions with status and shows the transcript', async () => {
  const { web, agentId } = await withAgent('Lister');
  const sent = await web.post('/chat', { agent_id: agentId, text: 'for the list' });
  const sessionId = String(sent.headers.location).split('=')[1]!;
  const list = await web.get('/conversations');
  assert.equal(list.statusCode, 200);
  // Each row says what was said last, so that conversations can be told apart; the id is under it.
  assert.match(list.body, new RegExp(`<a href="/conversations/${sessionId}"><span class="preview">Lister: You said: for the list</span></a><code class="session-id">${sessionId}</code>`));
  const long = await web.post('/chat', { session_id: sessionId, text: `a line\n\nthat goes on ${'and on '.repeat(20)}` });
  assert.equal(long.statusCode, 303);
  const again = (await web.get('/conversations')).body;
  const shown = /<span class="preview">([^<]*)<\/span>/.exec(again)![1]!;
  assert.equal([...shown].length, 'Lister: '.length + 80, 'cut to 80 characters');
  assert.match(shown, /^Lister: You said: a line that goes on and on .*…$/, 'on one line, ending with an ellipsis');
  assert.match(list.body, new RegExp(`<td data-label="Agent"><a href="/conversations/${sessionId}">Lister<span class="sr-only"> \\(conversation ${sessionId}\\)</span></a></td>`),
    'the agent name leads to the transcript too');
  assert.match(list.body, /<td data-label="Channel">web<\/td>/);
  const transcript = await web.get(`/conversations/${sessionId}`);
  assert.equal(transcript.statusCode, 200);
  assert.match(transcript.body, /Conversation with Lister/);
  assert.match(transcript.body, /You said: for the list/);
});

test('happy: sessions started through the API show up too', async () => {
  const u = await t.userWithAgent({ agentName: 'Api bot' });
  const sent = await t.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text: 'via api' } });
  const sessionId = sent.json().session_id;
  const web = new WebClient(t);
  await web.login(u.email, u.password);
  const list = await web.get('/conversations');
  assert.ok(list.body.includes(sessionId));
  assert.match(list.body, /<td data-label="Channel">api<\/td>/);
});

test('error: an empty message is explained on the page, and the agent failing shows in the transcript', async () => {
  const { web, agentId } = await withAgent();
  await web.get('/chat');
  const empty = await web.post('/chat', { agent_id: agentId, text: '   ' });
  assert.equal(empty.statusCode, 422);
  assert.match(empty.body, /role="alert"/);
  assert.match(empty.body, /<title>Error: Chat · agent-channel<\/title>/);
  const failed = await web.post('/chat', { agent_id: agentId, text: '!fail' });
  assert.equal(failed.statusCode, 303);
  const page = await web.get(String(failed.headers.location));
  assert.match(page.body, /msg-error/);
  // Marked in words; the code is there for whoever reads the API too.
  assert.match(page.body, /<span class="badge badge-error" title="Error code: agent_failed">failed<\/span>/);
});

test('the message field is no stricter than the server: 32,000 characters, counted as code points', async () => {
  const { web, agentId } = await withAgent();
  const page = await web.get('/chat');
  const textarea = /<textarea id="chat-text"[^>]*>/.exec(page.body)![0];
  assert.doesNotMatch(textarea, /maxlength/, 'maxlength would count UTF-16 units: 16,000 emoji at most');
  assert.match(textarea, /data-max-chars="32000"/);
  const atLimit = '😀'.repeat(32_000); // 64,000 UTF-16 units
  const sent = await web.post('/chat', { agent_id: agentId, text: atLimit });
  assert.equal(sent.statusCode, 303, 'accepted');
  const over = await web.post('/chat', { agent_id: agentId, text: `${atLimit}😀` });
  assert.equal(over.statusCode, 422);
  assert.match(over.body, /role="alert">The message is too long: at most 32,000 characters\.<\/div>/);
  const json = await web.post('/chat', { agent_id: agentId, text: `${atLimit}😀` }, { accept: 'application/json' });
  assert.equal(json.json().message, 'The message is too long: at most 32,000 characters.');
});

test("security: another account's session id answers 404 on every page", async () => {
  const other = await t.userWithAgent();
  const sent = await t.inject({ method: 'POST', url: `${API}/messages`, headers: other.auth, payload: { text: 'private words' } });
  const sessionId = sent.json().session_id;
  const { web } = await withAgent();
  await web.get('/chat');
  for (const url of [`/conversations/${sessionId}`, `/chat?session=${sessionId}`, '/conversations/ses_doesnotexist', '/chat?session=nonsense']) {
    const res = await web.get(url);
    assert.equal(res.statusCode, 404, url);
    assert.ok(!res.body.includes('private words'));
  }
  const json = await web.get(`/conversations/${sessionId}/messages.json`, { accept: 'application/json' });
  assert.equal(json.statusCode, 404);
  const post = await web.post('/chat', { session_id: sessionId, text: 'let me in' });
  assert.equal(post.statusCode, 404);
  const list = await web.get('/conversations');
  assert.ok(!list.body.includes(sessionId));
  const turns = await t.runtime.store.db.selectFrom('turns').select('text').where('session_id', '=', sessionId).execute();
  assert.ok(!turns.some((turn) => turn.text === 'let me in'), 'nothing was added to the other session');
});

test('security: HTML in messages is escaped', async () => {
  const { web, agentId } = await withAgent();
  await web.get('/chat');
  const sent = await web.post('/chat', { agent_id: agentId, text: '<img src=x onerror="alert(1)">' });
  const page = await web.get(String(sent.headers.location));
  assert.ok(!page.body.includes('<img src=x'));
  assert.ok(page.body.includes('&lt;img src=x onerror=&quot;alert(1)&quot;&gt;'));
  const sessionId = String(sent.headers.location).split('=')[1]!;
  const transcript = await web.get(`/conversations/${sessionId}`);
  assert.ok(!transcript.body.includes('<img src=x'));
  // What the agent waits for is the agent's text too.
  await web.post('/chat', { session_id: sessionId, text: '!action <i>kind</i> <img src=y onerror="alert(2)">' });
  const waiting = (await web.get(String(sent.headers.location))).body;
  assert.match(waiting, /<span class="badge badge-kind">&lt;i&gt;kind&lt;\/i&gt;<\/span> <h2 class="item-title">&lt;img src=y onerror=&quot;alert\(2\)&quot;&gt;<\/h2>/);
  assert.ok(!waiting.includes('<img src=y'));
});

test('security: the JSON transcript needs a session and the chat post needs the token', async () => {
  const { web, agentId } = await withAgent();
  const sent = await web.post('/chat', { agent_id: agentId, text: 'hi' });
  const sessionId = String(sent.headers.location).split('=')[1]!;
  const anonymous = await t.inject({ method: 'GET', url: `/conversations/${sessionId}/messages.json`, headers: { accept: 'application/json' } });
  assert.equal(anonymous.statusCode, 401);
  const noToken = await t.inject({
    method: 'POST', url: '/chat', payload: `agent_id=${agentId}&text=x`,
    headers: { cookie: web.cookieHeader(), accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(noToken.statusCode, 403);
});

test('error: text no database stores as sent (NUL) in a form or a query string is a 422 page, and nothing is sent', async () => {
  const { web, agentId } = await withAgent();
  await web.get('/chat');
  const sent = await web.post('/chat', { agent_id: agentId, text: 'a\u0000b' });
  assert.equal(sent.statusCode, 422);
  assert.match(sent.body, /NUL character/);
  const viewed = await web.get('/chat?session=ses_%00');
  assert.equal(viewed.statusCode, 422);
  const sessions = await t.runtime.store.db.selectFrom('sessions').select('id').where('agent_id', '=', agentId).execute();
  assert.deepEqual(sessions, []);
});
