import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import { heldReads, timed } from '../../../testing/feed.ts';
import { API, startTestApp, withTestApp, type TestApp, type TestUser } from '../../../testing/harness.ts';

/** §9.1: GET /sessions/{id}/messages?after=<ts> with `Prefer: wait=N` is held until a newer turn is written. */
let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000, duplicateWindowMs: 0 }); });
after(async () => { await t.close(); });

const heldTranscript = (app: TestApp, u: Pick<TestUser, 'auth'>, sessionId: string, query: string, wait: string) =>
  app.inject({ method: 'GET', url: `${API}/sessions/${sessionId}/messages?${query}`, headers: { ...u.auth, prefer: wait } });

const remaining = (res: { headers: Record<string, unknown> }) => Number(/r=(\d+)/.exec(String(res.headers['ratelimit']))?.[1]);

test('a held read answers as soon as the agent\'s turn lands, with that turn, well before its wait ends', async () => {
  const u = await t.userWithAgent();
  const sent = (await send(t, u, { text: '!sleep 300' }, { Prefer: 'wait=0' })).json();
  assert.equal(sent.status, 'processing');
  const { value: res, ms } = await timed(heldTranscript(t, u, sent.session_id, `after=${encodeURIComponent(sent.message_ts)}`, 'wait=10'));
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['preference-applied'], 'wait=10');
  const body = res.json();
  assert.deepEqual(body.messages.map((m: { role: string; text: string }) => [m.role, m.text]), [['agent', 'Slept 300 ms.']], 'answered with the new turn');
  assert.ok(ms < 5_000, `answered after ${Math.round(ms)} ms, not at the end of a 10 s wait`);
  assert.equal(body.status, 'idle');
  assert.deepEqual(body.awaiting, []);
});

test('any turn ends the wait: a user turn sent to the session wakes a held read', async () => {
  const u = await t.userWithAgent();
  const first = (await send(t, u, { text: 'hello' })).json();
  const holding = heldTranscript(t, u, first.session_id, `after=${encodeURIComponent(first.reply_ts)}`, 'wait=10');
  await heldReads(t, 1);
  // The agent takes 3 s over this one: the read ends with the user's turn alone.
  const second = (await send(t, u, { text: '!sleep 3000 later', session_id: first.session_id }, { Prefer: 'wait=0' })).json();
  const res = await holding;
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json().messages.map((m: { role: string; ts: string }) => [m.role, m.ts]), [['user', second.message_ts]]);
  assert.equal(res.json().status, 'processing');
});

test('at the end of its wait a held read answers 200 with no messages and the session\'s current status', async () => {
  const u = await t.userWithAgent();
  const sent = (await send(t, u, { text: 'quiet afterwards' })).json();
  const { value: res, ms } = await timed(heldTranscript(t, u, sent.session_id, `after=${encodeURIComponent(sent.reply_ts)}`, 'wait=1'));
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['preference-applied'], 'wait=1');
  assert.ok(ms >= 990, `held for its whole 1 s wait (${Math.round(ms)} ms; a timer may fire a millisecond early)`);
  const body = res.json();
  assert.deepEqual(body.messages, []);
  assert.equal(body.status, 'idle');
  assert.equal(body.has_more, false);
  assert.equal(body.session_id, sent.session_id);
});

test('Preference-Applied gives the wait held in whole seconds, capped by the ceiling', async () => {
  await withTestApp(async (small) => {
    const u = await small.userWithAgent();
    const sent = (await send(small, u, { text: 'capped' })).json();
    const after = `after=${encodeURIComponent(sent.reply_ts)}`;
    const { value: capped, ms } = await timed(heldTranscript(small, u, sent.session_id, after, 'wait=600'));
    assert.equal(capped.statusCode, 200);
    assert.equal(capped.headers['preference-applied'], 'wait=1', 'a 1.5 s ceiling, rounded down');
    assert.ok(ms >= 1_490 && ms < 10_000, `held for the 1.5 s ceiling, not for the 600 s asked (${Math.round(ms)} ms)`);
    assert.deepEqual(capped.json().messages, []);
    const zero = await heldTranscript(small, u, sent.session_id, after, 'wait=0');
    assert.equal(zero.headers['preference-applied'], 'wait=0');
  }, { waitCeilingMs: 1_500 });
});

test('no hold without after, nor without Prefer: the read answers at once, with no Preference-Applied', async () => {
  const u = await t.userWithAgent();
  const sent = (await send(t, u, { text: 'answered at once' })).json();
  const { value: withoutAfter, ms: msWithoutAfter } = await timed(heldTranscript(t, u, sent.session_id, 'limit=50', 'wait=10'));
  assert.equal(withoutAfter.statusCode, 200);
  assert.equal(withoutAfter.headers['preference-applied'], undefined);
  assert.equal(withoutAfter.json().messages.length, 2);
  const { value: withoutPrefer, ms: msWithoutPrefer } = await timed(transcript(t, u, sent.session_id, `after=${encodeURIComponent(sent.reply_ts)}`));
  assert.equal(withoutPrefer.statusCode, 200);
  assert.equal(withoutPrefer.headers['preference-applied'], undefined);
  assert.deepEqual(withoutPrefer.json().messages, []);
  for (const ms of [msWithoutAfter, msWithoutPrefer]) assert.ok(ms < 5_000, `answered at once (${Math.round(ms)} ms)`);
  assert.equal(t.runtime.engine.wakeups.held, 0);
});

test('a held read counts once against the key\'s rate limit, however long it is held', async () => {
  const u = await t.userWithAgent({ rateLimit: 5 });
  const sent = (await send(t, u, { text: 'counted' })).json();
  assert.equal(remaining(await transcript(t, u, sent.session_id)), 3, 'the send took one, this read another');
  const held = await heldTranscript(t, u, sent.session_id, `after=${encodeURIComponent(sent.reply_ts)}`, 'wait=1');
  assert.equal(held.statusCode, 200);
  assert.equal(remaining(held), 2);
  assert.equal(remaining(await transcript(t, u, sent.session_id)), 1, 'the held read took one request of the quota');
});
