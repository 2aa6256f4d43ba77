import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('lists the agents of every workspace the caller belongs to', async () => {
  const owner = await t.userWithAgent({ agentName: 'Owner bot' });
  const member = await t.userWithAgent({ agentName: 'Own bot' });
  await t.runtime.services.accounts.addMember({
    workspaceId: await t.runtime.services.accounts.personalWorkspaceId(owner.id), email: member.email, role: 'member',
  });
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: member.auth });
  assert.equal(res.statusCode, 200);
  const names = res.json().agents.map((a: { name: string }) => a.name).sort();
  assert.deepEqual(names, ['Own bot', 'Owner bot']);
  for (const agent of res.json().agents) {
    assert.match(agent.agent_id, /^agt_/);
    assert.match(agent.workspace_id, /^wsp_/);
  }
});

test('a user with no agents gets an empty list', async () => {
  const u = await t.user();
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { agents: [] });
});
