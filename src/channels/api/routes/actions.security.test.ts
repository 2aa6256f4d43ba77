import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  agentTexts, decideOne, draftAction, listActions, memberOfOwnersWorkspace, postDecisions, settledTranscript, unique,
} from '../../../testing/missions.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('401 without a key, for every missions route', async () => {
  for (const [method, url] of [['GET', '/actions'], ['POST', '/actions/decisions'], ['GET', '/questions'], ['POST', '/questions/answers']] as const) {
    const res = await t.inject({ method, url: `${API}${url}`, ...(method === 'POST' ? { payload: [] } : {}) });
    assert.equal(res.statusCode, 401, url);
    assert.equal(res.json().code, 'unauthorized');
  }
});

test('a stranger sees none of the owner\'s actions, also when filtering by the owner\'s session', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'email', unique('private'));
  const stranger = await t.userWithAgent();
  assert.deepEqual((await listActions(t, stranger)).json(), { actions: [], has_more: false });
  assert.deepEqual((await listActions(t, stranger, `?session_id=${drafted.sessionId}`)).json(), { actions: [], has_more: false });
});

test('a stranger deciding on the owner\'s action gets exactly what a missing id gets, and changes nothing', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'email', unique('not yours'));
  const stranger = await t.userWithAgent();
  for (const decision of ['approve', 'approve_same_type', 'reject']) {
    const theirs = await decideOne(t, stranger, { operation_id: drafted.operationId, decision, reason: 'no' });
    const missing = await decideOne(t, stranger, { operation_id: 'op_doesnotexist0000000000', decision, reason: 'no' });
    assert.deepEqual(theirs.error, missing.error);
    assert.equal(theirs.error.code, 'not_found');
  }
  assert.equal((await listActions(t, owner)).json().actions.length, 1);
  const messages = await settledTranscript(t, owner, drafted.sessionId, 1);
  assert.equal(agentTexts(messages).length, 1);
});

test('a member of the agent\'s workspace neither sees nor settles the owner\'s actions (only the mission\'s owner does)', async () => {
  const owner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, owner);
  const drafted = await draftAction(t, owner, 'email', unique('owner only'));
  assert.deepEqual((await listActions(t, member)).json(), { actions: [], has_more: false });
  const result = await decideOne(t, member, { operation_id: drafted.operationId, decision: 'approve' });
  assert.equal(result.error.code, 'not_found');
  // approve_same_type from the member's own action of that kind leaves the owner's alone.
  const own = await draftAction(t, member, 'email', unique('member\'s own'), { agentId: owner.agentId });
  const same = await decideOne(t, member, { operation_id: own.operationId, decision: 'approve_same_type' });
  assert.deepEqual(same.also_approved, []);
  assert.deepEqual((await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id), [drafted.operationId]);
});

test('the race: many concurrent decisions on one action, exactly one wins and one continuation turn is written', async () => {
  const owner = await t.userWithAgent();
  const summary = unique('Pay the invoice');
  const drafted = await draftAction(t, owner, 'payment', summary);
  const decisions = ['approve', 'reject', 'approve_same_type', 'approve', 'reject', 'approve', 'approve_same_type', 'reject'];
  const responses = await Promise.all(decisions.map((decision, i) =>
    postDecisions(t, owner, [{ operation_id: drafted.operationId, decision, ...(decision === 'reject' && i % 2 ? { reason: 'race' } : {}) }])));
  const results = responses.map((res) => {
    assert.equal(res.statusCode, 200, res.body);
    return res.json().results[0];
  });
  const winners = results.filter((r) => r.ok);
  assert.equal(winners.length, 1, JSON.stringify(results));
  assert.ok(results.filter((r) => !r.ok).every((r) => r.error.code === 'already_settled'), JSON.stringify(results));

  const messages = await settledTranscript(t, owner, drafted.sessionId, 2);
  const continuations = agentTexts(messages).slice(1);
  assert.equal(continuations.length, 1, JSON.stringify(continuations));
  const expected = winners[0].outcome === 'approved' ? `Done: ${summary}` : /^(Re-planned: race|Stopped\.)$/;
  if (typeof expected === 'string') assert.equal(continuations[0], expected);
  else assert.match(continuations[0]!, expected);
  const jobs = await t.runtime.store.db.selectFrom('jobs').select('id').where('session_id', '=', drafted.sessionId).where('kind', '=', 'continuation').execute();
  assert.equal(jobs.length, 1);
});

test('the race across approve_same_type: concurrent bulk approvals approve each action once', async () => {
  const owner = await t.userWithAgent();
  const drafts: Awaited<ReturnType<typeof draftAction>>[] = [];
  for (let i = 0; i < 4; i++) drafts.push(await draftAction(t, owner, 'email', unique(`batch ${i}`), drafts[0]?.sessionId ?? { agentId: owner.agentId }));
  const responses = await Promise.all(drafts.map((d) => postDecisions(t, owner, [{ operation_id: d.operationId, decision: 'approve_same_type' }])));
  const approvedIds: string[] = [];
  for (const res of responses) {
    const [r] = res.json().results;
    if (r.ok) approvedIds.push(r.operation_id, ...r.also_approved);
    else assert.equal(r.error.code, 'already_settled');
  }
  assert.deepEqual([...approvedIds].sort(), drafts.map((d) => d.operationId).sort());
  const messages = await settledTranscript(t, owner, drafts[0]!.sessionId, 8);
  assert.equal(agentTexts(messages).filter((text) => text.startsWith('Done: ')).length, 4);
});
