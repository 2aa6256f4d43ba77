import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('lists only the caller\'s agents, never another account\'s', async () => {
  const alice = await t.userWithAgent({ agentName: 'Alice bot' });
  const bob = await t.userWithAgent({ agentName: 'Bob bot' });
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: alice.auth });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json().agents.map((a: { agent_id: string }) => a.agent_id), [alice.agentId]);
  assert.ok(!res.body.includes(bob.agentId));
});

test('the key decides the account: the same request with another key lists other agents', async () => {
  const alice = await t.userWithAgent();
  const bob = await t.userWithAgent();
  const asAlice = await t.inject({ method: 'GET', url: `${API}/agents`, headers: alice.auth });
  const asBob = await t.inject({ method: 'GET', url: `${API}/agents`, headers: bob.auth });
  assert.equal(asAlice.json().agents[0].agent_id, alice.agentId);
  assert.equal(asBob.json().agents[0].agent_id, bob.agentId);
});

test('without a valid key nothing is listed', async () => {
  await t.userWithAgent();
  const res = await t.inject({ method: 'GET', url: `${API}/agents` });
  assert.equal(res.statusCode, 401);
  assert.ok(!('agents' in res.json()));
});
