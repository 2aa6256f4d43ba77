import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import { allEvents, cancelSession, sessionStatus } from '../../../testing/feed.ts';
import { startTestApp, withoutRequestId, type TestApp } from '../../../testing/harness.ts';
import { draftAction, listActions, unique } from '../../../testing/missions.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('another account\'s session is the same 404 as a missing one, and nothing of it is cancelled or closed', async () => {
  const owner = await t.userWithAgent();
  const other = await t.userWithAgent();
  const action = await draftAction(t, owner, 'email', unique('Theirs to keep'));
  await send(t, owner, { text: '!sleep 60000', session_id: action.sessionId }, { Prefer: 'wait=0' });
  await sessionStatus(t, owner, action.sessionId, 'processing');
  const eventsBefore = await allEvents(t, owner);

  const theirs = await cancelSession(t, other, action.sessionId);
  const missing = await cancelSession(t, other, 'ses_0000000000000000000000');
  assert.equal(theirs.statusCode, 404);
  assert.deepEqual(withoutRequestId(theirs.json()), withoutRequestId(missing.json()));

  assert.equal((await transcript(t, owner, action.sessionId)).json().status, 'processing');
  assert.deepEqual((await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id), [action.operationId]);
  assert.deepEqual(await allEvents(t, owner), eventsBefore);
  assert.deepEqual(await allEvents(t, other), []);
  // The owner's own cancel ends the sleep.
  assert.deepEqual((await cancelSession(t, owner, action.sessionId)).json(), { session_id: action.sessionId, cancelled: 1 });
});
