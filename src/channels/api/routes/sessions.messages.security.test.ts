import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import { timed } from '../../../testing/feed.ts';
import { API, startTestApp, withoutRequestId, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000 }); });
after(async () => { await t.close(); });

test('another account\'s session is the same 404 as a missing one, also for a read that asks to wait, and it is answered at once', async () => {
  const owner = await t.userWithAgent();
  const other = await t.userWithAgent();
  const sent = (await send(t, owner, { text: 'private' })).json();
  const after = `after=${encodeURIComponent(sent.reply_ts)}`;
  const held = (sessionId: string) => t.inject({
    method: 'GET', url: `${API}/sessions/${sessionId}/messages?${after}`, headers: { ...other.auth, prefer: 'wait=10' },
  });
  const { value: theirs, ms } = await timed(held(sent.session_id));
  assert.equal(theirs.statusCode, 404);
  assert.equal(theirs.json().code, 'session_not_found');
  assert.ok(ms < 5_000, `answered at once, not after the wait (${Math.round(ms)} ms)`);
  assert.equal(theirs.headers['preference-applied'], undefined, 'nothing was held');
  const missing = await held('ses_0000000000000000000000');
  assert.deepEqual(withoutRequestId(theirs.json()), withoutRequestId(missing.json()));
  assert.equal(t.runtime.engine.wakeups.held, 0);
  // And the owner's transcript is untouched by the attempt.
  assert.equal((await transcript(t, owner, sent.session_id)).json().messages.length, 2);
});
