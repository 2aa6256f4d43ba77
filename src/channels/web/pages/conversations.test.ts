import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { newId } from '../../../domain/ids.ts';
import { appendTurn } from '../../../store/repos/transcript.ts';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';
import { WebClient } from '../../../testing/web-client.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

async function signedIn(): Promise<{ web: WebClient; userId: string; agentId: string }> {
  const user = await t.userWithAgent({ agentName: 'Pager' });
  const web = new WebClient(t);
  await web.login(user.email, user.password);
  return { web, userId: user.id, agentId: user.agentId };
}

/** A session of `count` turns ("turn 1" … "turn N", user and agent by turns), written as the pipeline writes them. */
async function longSession(userId: string, agentId: string, count: number): Promise<string> {
  const sessionId = newId('session');
  const { db, dialect } = t.runtime.store;
  await db.insertInto('sessions').values({ id: sessionId, user_id: userId, agent_id: agentId, channel: 'web', last_ts: null, created_at: new Date().toISOString() }).execute();
  await db.transaction().execute(async (trx) => {
    for (let i = 1; i <= count; i++) await appendTurn(trx, dialect, { sessionId, role: i % 2 ? 'user' : 'agent', text: `turn ${i}` });
  });
  return sessionId;
}

const texts = (body: string) => [...body.matchAll(/<div class="msg-text">([^<]*)<\/div>/g)].map((m) => m[1]);
const turns = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `turn ${from + i}`);

test('the chat and the transcript of a long conversation show its latest messages, with a way to the earlier ones', async () => {
  const { web, userId, agentId } = await signedIn();
  const sessionId = await longSession(userId, agentId, 130);
  const chat = await web.get(`/chat?session=${sessionId}`);
  assert.equal(chat.statusCode, 200);
  assert.deepEqual(texts(chat.body), turns(31, 130), 'the newest 100, oldest first');
  const last = /data-last-ts="([^"]+)"/.exec(chat.body)![1]!;
  const earlier = /<a href="(\/conversations\/[^"]+\?before=[^"]+)">Earlier messages<\/a> \(showing the latest 100\)/.exec(chat.body)?.[1];
  assert.ok(earlier, 'a link to the earlier messages');

  // The earlier page: turns 1–30, nothing before them, said so, and a way forward.
  const page = await web.get(earlier.replaceAll('&amp;', '&'));
  assert.equal(page.statusCode, 200);
  assert.deepEqual(texts(page.body), turns(1, 30));
  assert.doesNotMatch(page.body, />Earlier messages</);
  assert.match(page.body, new RegExp(`<p class="muted small">The start of the conversation\\. <a href="/conversations/${sessionId}">Go to the latest</a></p>`));
  assert.doesNotMatch(page.body, /From the start/);
  const later = /<a class="btn btn-quiet" href="([^"]+)">Later messages<\/a>/.exec(page.body)?.[1];
  assert.ok(later);
  const latest = (await web.get(later)).body;
  assert.deepEqual(texts(latest), turns(31, 130));
  assert.match(latest, /<p class="muted small">The latest messages\.<\/p>/);
  assert.doesNotMatch(latest, />Later messages</);

  // The transcript page opens at the latest messages too, with the same way back; no words needed.
  const transcript = await web.get(`/conversations/${sessionId}`);
  assert.deepEqual(texts(transcript.body), turns(31, 130));
  assert.match(transcript.body, />Earlier messages<\/a>/);
  assert.doesNotMatch(transcript.body, /<p class="muted small">/);
  assert.doesNotMatch(transcript.body, />Later messages</);

  // What the chat's script polls for continues from the last message shown.
  const poll = await web.get(`/conversations/${sessionId}/messages.json?after=${encodeURIComponent(last)}`, { accept: 'application/json' });
  assert.deepEqual(poll.json().messages, []);

  // A short conversation has no such link.
  const short = await longSession(userId, agentId, 4);
  const shortChat = await web.get(`/chat?session=${short}`);
  assert.deepEqual(texts(shortChat.body), turns(1, 4));
  assert.doesNotMatch(shortChat.body, /Earlier messages/);
  // A malformed `before` is a 404 like any unreadable transcript, never a 500.
  assert.equal((await web.get(`/conversations/${sessionId}?before=yesterday`)).statusCode, 404);
});

test('the conversations list pages through every session, most recent first', async () => {
  const { web, userId, agentId } = await signedIn();
  const { db } = t.runtime.store;
  // 120 sessions, each with one turn at its own time; a few share a time (ties are ordered by id).
  const ids: string[] = [];
  const base = Date.parse('2026-01-01T00:00:00Z');
  for (let i = 0; i < 120; i++) {
    const id = newId('session');
    ids.push(id);
    const at = new Date(base + Math.floor(i / 3) * 60_000).toISOString().replace('Z', '000Z');
    await db.insertInto('sessions').values({ id, user_id: userId, agent_id: agentId, channel: 'api', last_ts: at, created_at: at }).execute();
  }
  const seen: string[] = [];
  let url: string | undefined = '/conversations';
  let pages = 0;
  while (url) {
    const res = await web.get(url);
    assert.equal(res.statusCode, 200, url);
    pages += 1;
    const rows = [...res.body.matchAll(/<td data-label="Conversation"><div><a href="\/conversations\/(ses_[A-Za-z0-9]+)">/g)].map((m) => m[1]!);
    assert.ok(rows.length <= 50);
    seen.push(...rows);
    url = /<a class="btn btn-quiet" href="(\/conversations\?older=[^"]+)">Older conversations<\/a>/.exec(res.body)?.[1];
    assert.ok(pages < 10);
  }
  assert.equal(pages, 3);
  assert.equal(seen.length, 120, 'every session once');
  assert.equal(new Set(seen).size, 120);
  // Most recent first: the last three inserted share the newest time.
  assert.deepEqual(new Set(seen.slice(0, 3)), new Set(ids.slice(117)));
  assert.deepEqual(new Set(seen.slice(-3)), new Set(ids.slice(0, 3)));

  const bad = await web.get('/conversations?older=not-a-cursor');
  assert.equal(bad.statusCode, 400);
  assert.match(bad.body, /could not be read/);
});

test('the conversations list shows each session\'s status (processing, queued, idle)', async () => {
  const { web, agentId } = await signedIn();
  await web.get('/chat');
  const busy = await web.post('/chat', { agent_id: agentId, text: '!sleep 1500 busy' }, { accept: 'application/json' });
  const waiting = await web.post('/chat', { agent_id: agentId, text: 'waiting' }, { accept: 'application/json' });
  const list = await web.get('/conversations');
  const statusOf = (id: string) => new RegExp(`${id}</code></div></td>[\\s\\S]*?<td data-label="Status"><span class="badge badge-(\\w+)">`).exec(list.body)?.[1];
  assert.equal(statusOf(busy.json().session_id), 'processing');
  assert.equal(statusOf(waiting.json().session_id), 'queued');
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const done = await web.get('/conversations');
    if (!/badge-(processing|queued)/.test(done.body)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail('both sessions went idle');
});

test('the conversations list and the transcript say "waiting for you" of a conversation stopped on your decision or answer, until it is settled', async () => {
  const { web, userId, agentId } = await signedIn();
  await web.get('/chat');
  const sessionOf = async (text: string) => String((await web.post('/chat', { agent_id: agentId, text })).headers.location).split('=')[1]!;
  const quiet = await sessionOf('nothing to settle');
  const acting = await sessionOf('!action email Send the list');
  const asking = await sessionOf('!ask yesno Go on?');
  const statusOf = (body: string, id: string) => new RegExp(`${id}</code></div></td>[\\s\\S]*?<td data-label="Status"><span class="badge badge-(\\w+)">([^<]*)<`).exec(body)?.slice(1, 3);
  const list = (await web.get('/conversations')).body;
  assert.deepEqual(statusOf(list, quiet), ['idle', 'idle']);
  assert.deepEqual(statusOf(list, acting), ['waiting', 'waiting for you']);
  assert.deepEqual(statusOf(list, asking), ['waiting', 'waiting for you']);
  assert.match((await web.get(`/conversations/${acting}`)).body, /<p><span class="badge badge-waiting">waiting for you<\/span> <a class="btn btn-small" href="\/chat\?session=/);

  // While its agent works on something else, a conversation says so instead.
  const busy = await web.post('/chat', { session_id: acting, text: '!sleep 1000 meanwhile' }, { accept: 'application/json' });
  assert.equal(busy.json().status, 'processing');
  assert.deepEqual(statusOf((await web.get('/conversations')).body, acting), ['processing', 'processing']);

  const { actions: [action] } = await t.runtime.services.missions.listActions(userId, { sessionId: acting });
  await t.runtime.services.missions.decide(userId, [{ operation_id: action!.operation_id, decision: 'approve' }]);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const now = (await web.get('/conversations')).body;
    if (statusOf(now, acting)?.[0] === 'idle') {
      assert.deepEqual(statusOf(now, asking), ['waiting', 'waiting for you'], 'the other one still waits');
      break;
    }
    assert.ok(Date.now() < deadline, 'the settled conversation is idle again');
    await new Promise((r) => setTimeout(r, 100));
  }
});
