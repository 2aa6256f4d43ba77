import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const createAgent = (auth: { authorization: string }, payload: Record<string, unknown>) =>
  t.inject({ method: 'POST', url: `${API}/agents`, headers: auth, payload });

test('creates the agent in the caller\'s personal workspace by default', async () => {
  const u = await t.user();
  const res = await createAgent(u.auth, { agent_name: 'Helper' });
  assert.equal(res.statusCode, 201);
  const body = res.json();
  assert.match(body.agent_id, /^agt_[A-Za-z0-9]+$/);
  assert.equal(body.name, 'Helper');
  assert.equal(body.workspace_id, await t.runtime.services.accounts.personalWorkspaceId(u.id));
});

test('the new agent shows up in GET /agents', async () => {
  const u = await t.user();
  const created = (await createAgent(u.auth, { agent_name: 'Listed' })).json();
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  assert.deepEqual(res.json(), { agents: [created] });
});

test('a name of exactly 100 characters is accepted, and surrounding blanks are trimmed', async () => {
  const long = await createAgent((await t.user()).auth, { agent_name: 'n'.repeat(100) });
  assert.equal(long.statusCode, 201);
  assert.equal(long.json().name, 'n'.repeat(100));
  const padded = await createAgent((await t.user()).auth, { agent_name: '  Padded  ' });
  assert.equal(padded.statusCode, 201);
  assert.equal(padded.json().name, 'Padded');
});

for (const role of ['admin', 'owner'] as const) {
  test(`an ${role} of a named workspace can create an agent there`, async () => {
    const owner = await t.user({ plan: 'pro' });
    const workspaceId = await t.runtime.services.accounts.personalWorkspaceId(owner.id);
    let caller = owner;
    if (role === 'admin') {
      caller = await t.user({ plan: 'pro' });
      await t.runtime.services.accounts.addMember({ workspaceId, email: caller.email, role: 'admin' });
    }
    const res = await createAgent(caller.auth, { agent_name: `By ${role}`, workspace_id: workspaceId });
    assert.equal(res.statusCode, 201);
    assert.equal(res.json().workspace_id, workspaceId);
    // Every member of the workspace can now message it.
    const listed = await t.inject({ method: 'GET', url: `${API}/agents`, headers: owner.auth });
    assert.ok(listed.json().agents.some((a: { agent_id: string }) => a.agent_id === res.json().agent_id));
  });
}

test('the pro plan allows more than one agent', async () => {
  const u = await t.user({ plan: 'pro' });
  for (const name of ['one', 'two', 'three']) {
    assert.equal((await createAgent(u.auth, { agent_name: name })).statusCode, 201);
  }
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  assert.equal(res.json().agents.length, 3);
});
