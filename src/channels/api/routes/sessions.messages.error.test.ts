import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('after that is not a valid ts → 422; limit outside 1–200 or not an integer → 422', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'hi' })).json().session_id;
  for (const query of ['after=yesterday', 'after=2026-11-22T12:34:56Z', 'after=2026-11-22T12:34:56.789Z', 'after=2026-02-30T00:00:00.000000Z',
    'after=2026-11-22T12:34:56.7890123Z', 'after=2026-11-22T12:34:56.789012Zjunk', 'limit=0', 'limit=201', 'limit=abc', 'limit=1.5', 'limit=-1', 'limit=', 'limit=5&limit=6']) {
    const res = await transcript(t, u, sessionId, query);
    assert.equal(res.statusCode, 422, query);
    assert.equal(res.json().code, 'validation_failed', query);
    assert.ok(Array.isArray(res.json().errors) && res.json().errors.length > 0, query);
  }
  const ok = await transcript(t, u, sessionId, 'limit=200&after=2026-11-22T12:34:56.789012Z');
  assert.equal(ok.statusCode, 200);
});

test('a missing session is 404 session_not_found; a query error on a missing session is still 422 first', async () => {
  const u = await t.userWithAgent();
  const missing = await transcript(t, u, 'ses_0000000000000000000000');
  assert.equal(missing.statusCode, 404);
  assert.equal(missing.json().code, 'session_not_found');
  const weird = await transcript(t, u, 'not-even-an-id');
  assert.equal(weird.statusCode, 404);
  const badQuery = await transcript(t, u, 'ses_0000000000000000000000', 'limit=999');
  assert.equal(badQuery.statusCode, 422);
});

test('a query parameter given twice is 422 saying so (not "expected string, received array")', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'twice' })).json().session_id;
  for (const [query, path] of [['limit=5&limit=6', 'limit'], ['after=a&after=b', 'after']] as const) {
    const res = await transcript(t, u, sessionId, query);
    assert.equal(res.statusCode, 422, query);
    assert.deepEqual(res.json().errors, [{ path, message: 'must be given once' }], query);
  }
});

test('a read that asks to wait (Prefer: wait) is still 422 for an after that is not a turn ts, answered at once', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'bad cursor' })).json().session_id;
  for (const bad of ['yesterday', '2026-11-22T12:34:56Z', 'evt_1']) {
    const started = performance.now();
    const res = await t.inject({ method: 'GET', url: `${API}/sessions/${sessionId}/messages?after=${encodeURIComponent(bad)}`, headers: { ...u.auth, prefer: 'wait=10' } });
    assert.equal(res.statusCode, 422, bad);
    assert.equal(res.json().code, 'validation_failed', bad);
    assert.deepEqual(res.json().errors.map((e: { path: string }) => e.path), ['after'], bad);
    assert.equal(res.headers['preference-applied'], undefined, `${bad}: nothing was held`);
    assert.ok(performance.now() - started < 5_000, `${bad}: answered at once, not after the wait`);
  }
});
