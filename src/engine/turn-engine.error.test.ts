import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../testing/conversation.ts';
import { startTestApp, type TestApp } from '../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 5000 }); });
after(async () => { await t.close(); });

test('a job whose outcome cannot be written (its session vanished) ends failed instead of retrying forever', async () => {
  const u = await t.userWithAgent();
  const res = await send(t, u, { text: '!sleep 300 gone' }, { Prefer: 'wait=0' });
  assert.equal(res.json().status, 'processing');
  const sessionId = res.json().session_id;
  const job = await t.runtime.store.db.selectFrom('jobs').select(['id']).where('session_id', '=', sessionId).executeTakeFirstOrThrow();
  await t.runtime.store.db.deleteFrom('sessions').where('id', '=', sessionId).execute();
  const state = await t.runtime.engine.waitForJob(Number(job.id), 10_000);
  assert.equal(state.job.status, 'failed');
  const row = await t.runtime.store.db.selectFrom('jobs').select(['status', 'attempts']).where('id', '=', job.id).executeTakeFirstOrThrow();
  assert.equal(row.status, 'failed');
  assert.equal(row.attempts, 1);
  // The agent is free again: its next turn runs.
  const next = await send(t, u, { text: 'still here' });
  assert.equal(next.json().status, 'completed');
});
