import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, test } from 'node:test';
import { pollTranscript, send, transcript } from '../../../testing/conversation.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => {
  t = await startTestApp({ waitCeilingMs: 10_000 });
  await t.app.listen({ port: 0, host: '127.0.0.1' }); // real sockets, for a client that hangs up
});
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

test('a client that hangs up while waiting is let go at once; its message is still answered', { timeout: 20_000 }, async () => {
  const u = await t.userWithAgent();
  const awaitingReply = async () => {
    const metrics = (await t.inject({ method: 'GET', url: '/metrics' })).body;
    return Number(/^requests_awaiting_reply (\d+)$/m.exec(metrics)?.[1]);
  };
  const until = async (what: string, condition: () => Promise<boolean>) => {
    for (let waited = 0; !(await condition()); waited += 20) {
      assert.ok(waited < 8000, what);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  assert.equal(await awaitingReply(), 0);
  const { port } = t.app.server.address() as { port: number };
  const body = JSON.stringify({ text: '!sleep 3000 still answered' });
  const sending = httpRequest({
    host: '127.0.0.1', port, method: 'POST', path: `${API}/messages`,
    headers: { ...u.auth, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
  });
  sending.on('error', () => {}); // the hang-up below
  sending.end(body);
  await until('the request waits for its turn', async () => (await awaitingReply()) === 1);
  sending.destroy();
  await until('the wait ends when the client hangs up', async () => (await awaitingReply()) === 0);

  // Let go while the turn still runs (it sleeps 3 s), not when it ended.
  const [session] = (await t.runtime.services.conversations.listSessionsPage(u.id)).sessions;
  const page = (await transcript(t, u, session!.session_id)).json();
  assert.equal(page.status, 'processing');
  const answered = await pollTranscript(t, u, page.session_id, (b) => b.status === 'idle');
  assert.deepEqual(answered.messages.map((m: any) => m.text), ['!sleep 3000 still answered', 'You said: still answered']);
});


test('a member taken out of a workspace can no longer message its agent, not even in a session begun while a member', async () => {
  const owner = await t.userWithAgent();
  const member = await t.user();
  const accounts = t.runtime.services.accounts;
  const workspaceId = await accounts.personalWorkspaceId(owner.id);
  await accounts.addMember({ workspaceId, email: member.email, role: 'member' });
  const sessionId = (await send(t, member, { text: 'hello while a member', agent_id: owner.agentId })).json().session_id;
  assert.equal((await transcript(t, member, sessionId)).json().messages.length, 2);

  await accounts.removeMember({ workspaceId, email: member.email });
  const after = await send(t, member, { text: 'still here?', session_id: sessionId });
  assert.equal(after.statusCode, 404, after.body);
  assert.equal(after.json().code, 'agent_not_found');
  // No turn was queued for the agent.
  assert.equal((await transcript(t, member, sessionId)).json().messages.length, 2);
});
