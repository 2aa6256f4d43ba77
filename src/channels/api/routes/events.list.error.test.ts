import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../../../testing/conversation.ts';
import { allEvents, readEvents, timed } from '../../../testing/feed.ts';
import { startTestApp, withTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000 }); });
after(async () => { await t.close(); });

test('limit outside 1–200 or not an integer → 422 validation_failed naming limit', async () => {
  const u = await t.userWithAgent();
  await send(t, u, { text: 'one event' });
  for (const query of ['limit=0', 'limit=201', 'limit=abc', 'limit=1.5', 'limit=-1', 'limit=', 'limit=5&limit=6']) {
    const res = await readEvents(t, u, query);
    assert.equal(res.statusCode, 422, query);
    assert.equal(res.json().code, 'validation_failed', query);
    assert.deepEqual(res.json().errors.map((e: { path: string }) => e.path), ['limit'], query);
  }
  for (const query of ['limit=1', 'limit=200']) assert.equal((await readEvents(t, u, query)).statusCode, 200, query);
});

test('an after that is not the id of one of your events → 422 validation_failed naming after, at once even when asked to wait', async () => {
  const u = await t.userWithAgent();
  await send(t, u, { text: 'one event' });
  const [mine] = await allEvents(t, u);
  const beyond = `evt_${Number(mine!.id.slice(4)) + 1_000_000}`;
  for (const bad of ['abc', 'evt_', 'evt_0', 'evt_x', 'evt_01', '42', 'evt_-1', 'evt_1.5', beyond, '2026-11-22T12:34:56.789012Z']) {
    const { value: res, ms } = await timed(readEvents(t, u, `after=${encodeURIComponent(bad)}`, { prefer: 'wait=10' }));
    assert.equal(res.statusCode, 422, bad);
    assert.equal(res.json().code, 'validation_failed', bad);
    assert.deepEqual(res.json().errors.map((e: { path: string }) => e.path), ['after'], bad);
    assert.equal(res.headers['preference-applied'], undefined, bad);
    assert.ok(ms < 5_000, `${bad}: answered at once (${Math.round(ms)} ms)`);
  }
});

test('a session_id that is missing or malformed → 404 session_not_found', async () => {
  const u = await t.userWithAgent();
  for (const sessionId of ['ses_0000000000000000000000', 'not-a-session']) {
    const res = await readEvents(t, u, `session_id=${sessionId}`, { prefer: 'wait=10' });
    assert.equal(res.statusCode, 404, sessionId);
    assert.equal(res.json().code, 'session_not_found', sessionId);
    assert.equal(res.headers['preference-applied'], undefined, sessionId);
  }
});

test('checked in the transcript\'s order: limit and the form of after (422) before the session (404)', async () => {
  const u = await t.userWithAgent();
  const missing = 'session_id=ses_0000000000000000000000';
  for (const [query, path] of [[`after=nonsense&${missing}`, 'after'], [`limit=0&${missing}`, 'limit'], [`limit=0&after=nonsense`, 'limit']] as const) {
    const res = await readEvents(t, u, query);
    assert.equal(res.statusCode, 422, query);
    assert.deepEqual(res.json().errors.map((e: { path: string }) => e.path), [path], query);
  }
  assert.equal((await readEvents(t, u, `after=evt_1&${missing}`)).statusCode, 404, 'a well-formed cursor: the session is looked at first');
});

test('an after older than the oldest event kept → 410 cursor_expired; a kept one still pages', async () => {
  await withTestApp(async (app) => {
    const u = await app.userWithAgent();
    const sessionId = (await send(app, u, { text: 'soon gone' })).json().session_id;
    await send(app, u, { text: 'gone too', session_id: sessionId });
    const [gone] = await allEvents(app, u);
    // The housekeeping runs an hour and a half ahead: every event so far is past the hour kept.
    assert.equal((await app.runtime.services.housekeeping.runOnce(Date.now() + 90 * 60_000)).events, 2);
    const kept = (await send(app, u, { text: 'kept', session_id: sessionId })).json();
    const expired = await readEvents(app, u, `after=${gone!.id}`, { prefer: 'wait=10' });
    assert.equal(expired.statusCode, 410);
    assert.equal(expired.json().code, 'cursor_expired');
    assert.equal(expired.headers['preference-applied'], undefined, 'answered at once: nothing was held');
    assert.match(expired.headers['content-type'] as string, /^application\/problem\+json/);
    // From the oldest kept without a cursor, and after a kept one as ever.
    const now = await allEvents(app, u);
    assert.deepEqual(now.map((e) => e.data), [{ text: 'You said: kept', ts: kept.reply_ts }]);
    assert.deepEqual((await readEvents(app, u, `after=${now[0]!.id}`)).json(), { events: [], has_more: false });
  }, { eventRetentionMs: 3_600_000 });
});
