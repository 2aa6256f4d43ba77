import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, type TestApp, withTestApp } from '../../../testing/harness.ts';
import { WebClient } from '../../../testing/web-client.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('happy: create an agent; it is listed with its workspace', async () => {
  const web = new WebClient(t);
  await web.signup();
  const page = await web.get('/agents');
  assert.match(page.body, /No agents yet/);
  // The free plan's one agent is said before the form is used, not only once it is switched off.
  assert.match(page.body, /<p class="muted small" id="agent-limit-note">This will be your only agent on the free plan: once it is created, this form is switched off\. The free plan allows 1 agent/);
  assert.match(page.body, /<option value="wsp_[A-Za-z0-9]+">Personal \(owner\)<\/option>/);
  const res = await web.post('/agents', { agent_name: 'Helper' });
  assert.equal(res.statusCode, 303);
  assert.match(String(res.headers.location), /^\/agents\?created=agt_/);
  const list = await web.get(String(res.headers.location));
  assert.match(list.body, /Agent “Helper” is ready/);
  assert.match(list.body, /<td data-label="Name">Helper<\/td>/);
  assert.match(list.body, /<td data-label="Workspace"><span>Personal <code class="muted">wsp_/);
  assert.match(list.body, /1 of 1 agent used/);
  assert.doesNotMatch(list.body, /agent-limit-note/, 'at the limit the form says so in its place');
});

test('happy: agents shared through another workspace are listed under that workspace', async () => {
  const owner = await t.userWithAgent({ agentName: 'Team bot' });
  const web = new WebClient(t);
  const email = await web.signup();
  await t.runtime.services.accounts.addMember({
    workspaceId: await t.runtime.services.accounts.personalWorkspaceId(owner.id), email, role: 'member',
  });
  const list = await web.get('/agents');
  assert.match(list.body, /<td data-label="Name">Team bot<\/td>/);
  assert.ok(list.body.includes(`${owner.email}&#39;s personal workspace`));
  assert.match(list.body, /0 of 1 agent used/, 'shared agents do not count against the plan');
});

test('error: the plan limit is explained when reached', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.get('/agents');
  assert.equal((await web.post('/agents', { agent_name: 'First' })).statusCode, 303);
  const page = await web.get('/agents');
  assert.match(page.body, /You have 1 of 1 agent, so you cannot create another\. The free plan allows 1 agent/);
  assert.match(page.body, /<fieldset class="contents" disabled>/, 'the create form is switched off at the limit');
  // A form sent anyway (e.g. from a tab opened before) is refused by the service, and explained.
  const res = await web.post('/agents', { agent_name: 'Second' });
  assert.equal(res.statusCode, 403);
  assert.match(res.body, /reached your plan's agent limit/);
  assert.match(res.body, /<title>Error: Agents · agent-channel<\/title>/);
  assert.match(res.body, /The free plan allows 1 agent, counting the agents in every workspace you own/);
  assert.match(res.body, /The pro plan allows 100: ask the operator of this service to move your account to it\./);
  // Nothing the app cannot do is suggested, and no operator's command (the CLI has none that
  // changes an account's plan; `users create --plan pro` makes a new account).
  const refusal = /<div class="notice notice-warn" role="status">([\s\S]*?)<\/div>/.exec(res.body)![1]!;
  assert.doesNotMatch(refusal, /delete an agent|bigger plan|upgrade|<code>|command-line|--plan/i);
  assert.match(res.body, /value="Second"/, 'the form keeps what was typed');
  assert.equal((await t.runtime.services.agents.listForUser((await t.runtime.services.accounts.findByEmail(email))!.id)).length, 1);
});

test('error: a blank or too long name is explained next to the field', async () => {
  const web = new WebClient(t);
  await web.signup();
  await web.get('/agents');
  const blank = await web.post('/agents', { agent_name: '   ' });
  assert.equal(blank.statusCode, 422);
  assert.match(blank.body, /id="f-agent_name-error">Name is required\.<\/p>/);
  const long = await web.post('/agents', { agent_name: 'x'.repeat(101) });
  assert.equal(long.statusCode, 422);
  assert.match(long.body, /id="f-agent_name-error">Name must be at most 100 characters\.<\/p>/);
  assert.doesNotMatch(long.body, /Too big|expected string/);
});

test('security: a workspace the user only belongs to as a member is refused', async () => {
  const owner = await t.user();
  const web = new WebClient(t);
  const email = await web.signup();
  const workspaceId = await t.runtime.services.accounts.personalWorkspaceId(owner.id);
  await t.runtime.services.accounts.addMember({ workspaceId, email, role: 'member' });
  const page = await web.get('/agents');
  assert.ok(!page.body.includes(`<option value="${workspaceId}"`), 'not offered');
  const res = await web.post('/agents', { agent_name: 'Sneaky', workspace_id: workspaceId });
  assert.equal(res.statusCode, 403);
  assert.match(res.body, /Only an owner or admin/);
  const stranger = await web.post('/agents', { agent_name: 'Sneaky', workspace_id: 'wsp_doesnotexist' });
  assert.equal(stranger.statusCode, 404);
});

test('security: HTML in agent names is escaped', async () => {
  const web = new WebClient(t);
  await web.signup();
  await web.get('/agents');
  await web.post('/agents', { agent_name: '<b onmouseover="alert(1)">Bold</b>' });
  const page = await web.get('/agents');
  assert.ok(!page.body.includes('<b onmouseover'));
  assert.ok(page.body.includes('&lt;b onmouseover=&quot;alert(1)&quot;&gt;Bold&lt;/b&gt;'));
  const chat = await web.get('/chat');
  assert.ok(!chat.body.includes('<b onmouseover'));
});

test('a pro account at its limit is told the limit, without a way to a bigger plan', async () => {
  await withTestApp(async (pro) => {
    const web = new WebClient(pro);
    const email = `pro-${Date.now()}@example.test`;
    await pro.runtime.services.accounts.createUser({ email, password: 'correct horse battery', plan: 'pro' });
    await web.login(email);
    const below = await web.get('/agents');
    assert.match(below.body, /0 of 2 agents used/);
    assert.doesNotMatch(below.body, /<fieldset class="contents" disabled>/, 'below the limit the form is on');
    for (const name of ['One', 'Two']) assert.equal((await web.post('/agents', { agent_name: name })).statusCode, 303);

    const page = await web.get('/agents');
    assert.match(page.body, /2 of 2 agents used/);
    assert.match(page.body, /<fieldset class="contents" disabled>/);
    assert.match(page.body, /You have 2 of 2 agents, so you cannot create another\. The pro plan allows 2 agents, counting the agents in every workspace you own \(agents that others share with you do not count\)\./);
    const res = await web.post('/agents', { agent_name: 'Three' });
    assert.equal(res.statusCode, 403);
    assert.match(res.body, /reached your plan's agent limit\.<\/strong> The pro plan allows 2 agents, counting the agents in every workspace you own \(agents that others share with you do not count\)\./);
    // The pro plan is the biggest there is: no other plan, command or upgrade is suggested.
    for (const body of [page.body, res.body]) assert.doesNotMatch(body, /pro plan allows 100|pro account|command-line tool|bigger plan|upgrade/i);
  }, { proAgentLimit: 2 });
});
