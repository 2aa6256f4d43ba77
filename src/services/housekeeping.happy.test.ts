import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../testing/conversation.ts';
import { startTestApp, type TestApp } from '../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ duplicateWindowMs: 10_000 }); });
after(async () => { await t.close(); });

test('expired idempotency records and duplicate-window claims are deleted; fresh ones stay', async () => {
  const u = await t.userWithAgent();
  await send(t, u, { text: 'kept for a day' }, { 'Idempotency-Key': 'k1' });
  await send(t, u, { text: 'claims the window' });
  const { housekeeping } = t.runtime.services;
  const now = await housekeeping.runOnce();
  assert.deepEqual(now, { idempotencyKeys: 0, recentMessages: 0 });
  const later = await housekeeping.runOnce(Date.now() + 25 * 3_600_000);
  assert.deepEqual(later, { idempotencyKeys: 1, recentMessages: 2 }, 'the keyed message claimed the window too');
  // After the window the same text is a new message again.
  const again = await send(t, u, { text: 'claims the window' });
  assert.equal(again.json().status, 'completed');
});
