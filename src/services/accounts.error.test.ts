import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, type TestApp } from '../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('adding the same person to a workspace twice at once adds them once, with no error (two operators, two CLI runs)', async () => {
  const { accounts } = t.runtime.services;
  const owner = await t.user();
  const member = await t.user();
  const workspaceId = await accounts.personalWorkspaceId(owner.id);
  const results = await Promise.allSettled([
    accounts.addMember({ workspaceId, email: member.email, role: 'member' }),
    accounts.addMember({ workspaceId, email: member.email, role: 'member' }),
  ]);
  assert.deepEqual(results.map((r) => (r.status === 'rejected' ? String(r.reason) : r.status)), ['fulfilled', 'fulfilled']);
  assert.equal(await accounts.roleIn(member.id, workspaceId), 'member');
});

test('a workspace\'s owner keeps that role, also when named as a member', async () => {
  const { accounts } = t.runtime.services;
  const owner = await t.user();
  const workspaceId = await accounts.personalWorkspaceId(owner.id);
  await assert.rejects(accounts.addMember({ workspaceId, email: owner.email, role: 'admin' }), { code: 'forbidden' });
  assert.equal(await accounts.roleIn(owner.id, workspaceId), 'owner');
});
