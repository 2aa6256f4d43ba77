import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000 }); });
after(async () => { await t.close(); });

test("another account's session answers exactly like a missing one, for sends and reads", async () => {
  const owner = await t.userWithAgent();
  const stranger = await t.userWithAgent();
  const sessionId = (await send(t, owner, { text: 'private' })).json().session_id;
  const strip = (body: any) => ({ ...body, request_id: undefined });

  const sendOther = await send(t, stranger, { text: 'let me in', session_id: sessionId });
  const sendMissing = await send(t, stranger, { text: 'let me in', session_id: 'ses_0000000000000000000000' });
  assert.equal(sendOther.statusCode, 404);
  assert.deepEqual(strip(sendOther.json()), strip(sendMissing.json()));

  const readOther = await transcript(t, stranger, sessionId);
  const readMissing = await transcript(t, stranger, 'ses_0000000000000000000000');
  assert.equal(readOther.statusCode, 404);
  assert.equal(readOther.json().code, 'session_not_found');
  assert.deepEqual(strip(readOther.json()), strip(readMissing.json()));
  assert.ok(!readOther.body.includes('private'));

  // Nothing was added to the owner's session.
  assert.equal((await transcript(t, owner, sessionId)).json().messages.length, 2);
});

test("another account's agent answers exactly like a missing one, and starts nothing", async () => {
  const owner = await t.userWithAgent();
  const stranger = await t.userWithAgent();
  const strip = (body: any) => ({ ...body, request_id: undefined });
  const other = await send(t, stranger, { text: 'hi', agent_id: owner.agentId });
  const missing = await send(t, stranger, { text: 'hi', agent_id: 'agt_0000000000000000000000' });
  assert.equal(other.statusCode, 404);
  assert.equal(other.json().code, 'agent_not_found');
  assert.deepEqual(strip(other.json()), strip(missing.json()));
  const sessions = await t.runtime.store.db.selectFrom('sessions').select('id').where('agent_id', '=', owner.agentId).execute();
  assert.equal(sessions.length, 0);
});

test('duplicates and idempotency keys are per account', async () => {
  const a = await t.userWithAgent();
  const b = await t.userWithAgent();
  const ra = await send(t, a, { text: 'same' }, { 'Idempotency-Key': 'shared-key' });
  const rb = await send(t, b, { text: 'same' }, { 'Idempotency-Key': 'shared-key' });
  assert.equal(ra.json().status, 'completed');
  assert.equal(rb.json().status, 'completed');
  assert.notEqual(ra.json().session_id, rb.json().session_id);
});
