import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../../../testing/conversation.ts';
import { cancelSession } from '../../../testing/feed.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('a missing or malformed session → 404 session_not_found', async () => {
  const u = await t.userWithAgent();
  for (const sessionId of ['ses_0000000000000000000000', 'not-a-session']) {
    const res = await cancelSession(t, u, sessionId);
    assert.equal(res.statusCode, 404, sessionId);
    assert.equal(res.json().code, 'session_not_found', sessionId);
  }
});

test('the cancel takes no body: one that is not JSON is refused before anything is cancelled', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'idle' })).json().session_id;
  const url = `${API}/sessions/${sessionId}/cancel`;
  const malformed = await t.inject({ method: 'POST', url, headers: { ...u.auth, 'content-type': 'application/json' }, payload: '{' });
  assert.equal(malformed.statusCode, 400);
  assert.equal(malformed.json().code, 'malformed_json');
  const text = await t.inject({ method: 'POST', url, headers: { ...u.auth, 'content-type': 'text/plain' }, payload: 'stop' });
  assert.equal(text.statusCode, 415);
  // An empty JSON body is no body to speak of.
  const empty = await t.inject({ method: 'POST', url, headers: { ...u.auth, 'content-type': 'application/json' }, payload: '{}' });
  assert.deepEqual(empty.json(), { session_id: sessionId, cancelled: 0 });
});
