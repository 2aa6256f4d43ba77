import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, withoutRequestId, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const createAgent = (auth: { authorization: string }, payload: Record<string, unknown>) =>
  t.inject({ method: 'POST', url: `${API}/agents`, headers: auth, payload });

const agentCount = async () =>
  Number((await t.runtime.store.db.selectFrom('agents').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

test('another account\'s workspace gets the same 404 as a workspace that does not exist', async () => {
  const stranger = await t.user({ plan: 'pro' });
  const strangersWorkspace = await t.runtime.services.accounts.personalWorkspaceId(stranger.id);
  const caller = await t.user({ plan: 'pro' });

  const foreign = await createAgent(caller.auth, { agent_name: 'x', workspace_id: strangersWorkspace });
  const missing = await createAgent(caller.auth, { agent_name: 'x', workspace_id: 'wsp_doesnotexist0000000000' });
  assert.equal(foreign.statusCode, 404);
  assert.equal(missing.statusCode, 404);
  assert.deepEqual(withoutRequestId(foreign.json()), withoutRequestId(missing.json()));
  assert.equal(foreign.headers['content-type'], missing.headers['content-type']);
  assert.ok(!foreign.body.includes(stranger.id) && !foreign.body.includes(stranger.email));
});

test('a failed creation creates nothing, whatever the reason', async () => {
  const full = await t.user({ plan: 'free' });
  assert.equal((await createAgent(full.auth, { agent_name: 'the only one' })).statusCode, 201);
  const owner = await t.user({ plan: 'pro' });
  const ownersWorkspace = await t.runtime.services.accounts.personalWorkspaceId(owner.id);
  const member = await t.user({ plan: 'pro' });
  await t.runtime.services.accounts.addMember({ workspaceId: ownersWorkspace, email: member.email, role: 'member' });

  const before = await agentCount();
  const failures = [
    await createAgent(member.auth, { agent_name: 'x'.repeat(101) }),
    await createAgent(member.auth, { agent_name: 'x', workspace_id: 'wsp_doesnotexist0000000000' }),
    await createAgent(member.auth, { agent_name: 'x', workspace_id: ownersWorkspace }),
    await createAgent(full.auth, { agent_name: 'x' }),
    await t.inject({ method: 'POST', url: `${API}/agents`, headers: { ...member.auth, 'content-type': 'application/json' }, payload: '{"agent_name":' }),
  ];
  assert.deepEqual(failures.map((r) => r.statusCode), [422, 404, 403, 403, 400]);
  assert.equal(await agentCount(), before);
});

test('an agent created in a shared workspace is not visible to accounts outside it', async () => {
  const admin = await t.user({ plan: 'pro' });
  const created = (await createAgent(admin.auth, { agent_name: 'Private' })).json();
  const outsider = await t.user();
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: outsider.auth });
  assert.deepEqual(res.json(), { agents: [] });
  assert.ok(!res.body.includes(created.agent_id));
});
