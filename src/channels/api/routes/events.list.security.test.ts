import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../../../testing/conversation.ts';
import { allEvents, heldReads, readEvents } from '../../../testing/feed.ts';
import { startTestApp, withoutRequestId, type TestApp } from '../../../testing/harness.ts';
import { askQuestion, draftAction, unique } from '../../../testing/missions.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000 }); });
after(async () => { await t.close(); });

test('another account never sees your events: not in its feed, not by your session_id (404), not after your event id (422)', async () => {
  const owner = await t.userWithAgent();
  const other = await t.userWithAgent();
  const action = await draftAction(t, owner, 'email', unique('Private mail'));
  await askQuestion(t, owner, 'text', unique('Private question?'), { target: action.sessionId });
  const mine = await allEvents(t, owner);
  assert.equal(mine.length, 4);

  assert.deepEqual(await allEvents(t, other), []);
  const bySession = await readEvents(t, other, `session_id=${action.sessionId}`);
  const missing = await readEvents(t, other, 'session_id=ses_0000000000000000000000');
  assert.equal(bySession.statusCode, 404);
  assert.deepEqual(withoutRequestId(bySession.json()), withoutRequestId(missing.json()), 'the same 404 as a missing session');
  // The other account's own events do not make yours readable either.
  await send(t, other, { text: 'their own' });
  const [theirs] = await allEvents(t, other);
  for (const event of mine) {
    const res = await readEvents(t, other, `after=${event.id}`);
    assert.equal(res.statusCode, 422, event.id);
    assert.deepEqual(res.json().errors, [{ path: 'after', message: 'must be the id of one of your events (evt_…)' }]);
    assert.doesNotMatch(res.body, /Private/);
  }
  assert.deepEqual((await allEvents(t, other)).map((e) => e.id), [theirs!.id]);
  // Nor can the owner page after theirs.
  assert.equal((await readEvents(t, owner, `after=${theirs!.id}`)).statusCode, 422);
});

test('a held read answers with none of another account\'s events written while it waits', async () => {
  const owner = await t.userWithAgent();
  const other = await t.userWithAgent();
  await send(t, other, { text: 'theirs first' });
  const [last] = await allEvents(t, other);
  const holding = readEvents(t, other, `after=${last!.id}`, { prefer: 'wait=1' });
  await heldReads(t, 1);
  await send(t, owner, { text: 'not for them' });
  const res = await holding;
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { events: [], has_more: false });
});
