import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp, type TestUser } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const createAgent = (auth: { authorization: string }, payload: unknown) =>
  t.inject({ method: 'POST', url: `${API}/agents`, headers: auth, payload: payload as Record<string, unknown> });

/** A workspace owned by someone else in which `caller` has `role`. */
async function workspaceWhere(caller: TestUser, role: 'member' | 'admin'): Promise<string> {
  const owner = await t.user({ plan: 'pro' });
  const workspaceId = await t.runtime.services.accounts.personalWorkspaceId(owner.id);
  await t.runtime.services.accounts.addMember({ workspaceId, email: caller.email, role });
  return workspaceId;
}

const invalidBodies: Array<[string, unknown, string]> = [
  ['agent_name missing', {}, 'agent_name'],
  ['agent_name blank', { agent_name: '   ' }, 'agent_name'],
  ['agent_name empty', { agent_name: '' }, 'agent_name'],
  ['agent_name over 100 characters', { agent_name: 'x'.repeat(101) }, 'agent_name'],
  ['agent_name a number', { agent_name: 42 }, 'agent_name'],
  ['agent_name null', { agent_name: null }, 'agent_name'],
  ['workspace_id a number', { agent_name: 'ok', workspace_id: 7 }, 'workspace_id'],
  ['workspace_id empty', { agent_name: 'ok', workspace_id: '' }, 'workspace_id'],
];

for (const [what, body, path] of invalidBodies) {
  test(`422 validation_failed when ${what}`, async () => {
    const u = await t.user();
    const res = await createAgent(u.auth, body);
    assert.equal(res.statusCode, 422);
    assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
    const problem = res.json();
    assert.equal(problem.code, 'validation_failed');
    assert.equal(problem.status, 422);
    assert.ok(Array.isArray(problem.errors) && problem.errors.length > 0);
    assert.ok(problem.errors.some((e: { path: string }) => e.path === path), JSON.stringify(problem.errors));
    for (const e of problem.errors) assert.equal(typeof e.message, 'string');
  });
}

test('422 validation_failed when the body is a JSON array, not an object', async () => {
  const res = await createAgent((await t.user()).auth, [{ agent_name: 'x' }]);
  assert.equal(res.statusCode, 422);
  assert.equal(res.json().code, 'validation_failed');
});

test('404 workspace_not_found for a workspace that does not exist', async () => {
  const res = await createAgent((await t.user()).auth, { agent_name: 'x', workspace_id: 'wsp_doesnotexist0000000000' });
  assert.equal(res.statusCode, 404);
  assert.equal(res.json().code, 'workspace_not_found');
});

test('404 workspace_not_found for a value that is not even a workspace id, however long', async () => {
  for (const workspaceId of ["agt_' or 1=1 --", `wsp_${'a'.repeat(100)}`, `wsp_${'a'.repeat(10_000)}`]) {
    const res = await createAgent((await t.user()).auth, { agent_name: 'x', workspace_id: workspaceId });
    assert.equal(res.statusCode, 404, res.body);
    assert.equal(res.json().code, 'workspace_not_found');
  }
});

test('403 forbidden for a plain member of the workspace', async () => {
  const u = await t.user({ plan: 'pro' });
  const res = await createAgent(u.auth, { agent_name: 'x', workspace_id: await workspaceWhere(u, 'member') });
  assert.equal(res.statusCode, 403);
  assert.equal(res.json().code, 'forbidden');
});

test('403 agent_limit_reached on the free plan\'s second agent', async () => {
  const u = await t.user({ plan: 'free' });
  assert.equal((await createAgent(u.auth, { agent_name: 'first' })).statusCode, 201);
  const res = await createAgent(u.auth, { agent_name: 'second' });
  assert.equal(res.statusCode, 403);
  assert.equal(res.json().code, 'agent_limit_reached');
});

test('checks run in the contract\'s order: 422 before 404 before 403 forbidden before 403 limit', async () => {
  const u = await t.user({ plan: 'free' });
  assert.equal((await createAgent(u.auth, { agent_name: 'fills the plan' })).statusCode, 201);
  const memberOf = await workspaceWhere(u, 'member');

  // Invalid name and unknown workspace: the body is judged first.
  const invalid = await createAgent(u.auth, { agent_name: '', workspace_id: 'wsp_unknown000000000000000' });
  assert.equal(invalid.json().code, 'validation_failed');
  // Unknown workspace with a full plan: the workspace is judged before the plan.
  const missing = await createAgent(u.auth, { agent_name: 'x', workspace_id: 'wsp_unknown000000000000000' });
  assert.equal(missing.json().code, 'workspace_not_found');
  // Member only, with a full plan: the role is judged before the plan.
  const member = await createAgent(u.auth, { agent_name: 'x', workspace_id: memberOf });
  assert.equal(member.json().code, 'forbidden');
  // Own workspace, full plan.
  const limit = await createAgent(u.auth, { agent_name: 'x' });
  assert.equal(limit.json().code, 'agent_limit_reached');
});

test('an admin on the free plan who already has an agent is stopped by the plan, not the role', async () => {
  const u = await t.user({ plan: 'free' });
  assert.equal((await createAgent(u.auth, { agent_name: 'own' })).statusCode, 201);
  const res = await createAgent(u.auth, { agent_name: 'elsewhere', workspace_id: await workspaceWhere(u, 'admin') });
  assert.equal(res.statusCode, 403);
  assert.equal(res.json().code, 'agent_limit_reached');
});

test('each 422 says what to send: a missing agent_name "is required", a wrong type names both types', async () => {
  const u = await t.user();
  const messages = async (body: unknown) => (await createAgent(u.auth, body)).json().errors;
  assert.deepEqual(await messages({}), [{ path: 'agent_name', message: 'is required' }]);
  assert.deepEqual(await messages({ agent_name: 42 }), [{ path: 'agent_name', message: 'must be a string, not a number' }]);
  assert.deepEqual(await messages({ agent_name: 'ok', workspace_id: '' }), [{ path: 'workspace_id', message: 'must not be empty' }]);
  assert.deepEqual(await messages([]), [{ path: '', message: 'must be an object, not an array' }]);
  // A message of the schema's own stays as it is.
  assert.deepEqual(await messages({ agent_name: 'x'.repeat(101) }), [{ path: 'agent_name', message: 'must be at most 100 characters' }]);
  assert.equal((await createAgent(u.auth, {})).json().detail, 'agent_name: is required');
});
