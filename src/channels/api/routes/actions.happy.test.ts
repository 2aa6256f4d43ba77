import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  agentTexts, decideOne, draftAction, listActions, memberOfOwnersWorkspace, postDecisions, send, settledTranscript, unique,
} from '../../../testing/missions.ts';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const missionStatus = async (operationId: string) => {
  const row = await t.runtime.store.db.selectFrom('actions').innerJoin('missions', 'missions.id', 'actions.mission_id')
    .select(['actions.status as action', 'missions.status as mission']).where('actions.id', '=', operationId).executeTakeFirstOrThrow();
  return { ...row }; // node:sqlite rows have a null prototype
};

test('!action drafts a pending action that GET /actions lists with every field of §5; the session goes idle', async () => {
  const owner = await t.userWithAgent();
  const summary = unique('Send the report');
  const drafted = await draftAction(t, owner, 'email', summary);
  assert.match(drafted.reply, new RegExp(`operation_id ${drafted.operationId}`));

  const res = await listActions(t, owner);
  assert.equal(res.statusCode, 200);
  const { actions } = res.json();
  assert.equal(actions.length, 1);
  const [a] = actions;
  assert.equal(a.operation_id, drafted.operationId);
  assert.match(a.operation_id, /^op_/);
  assert.equal(a.kind, 'email');
  assert.equal(a.summary, summary);
  assert.deepEqual(a.details, { kind: 'email', summary });
  assert.equal(a.session_id, drafted.sessionId);
  assert.equal(a.agent_id, owner.agentId);
  assert.match(a.mission_id, /^msn_/);
  assert.match(a.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
  // The pending action suspends the mission, not the agent: the session is idle and takes new work.
  const messages = await settledTranscript(t, owner, drafted.sessionId, 1);
  assert.equal(messages.length, 2);
  const plain = await send(t, owner, unique('still there?'), drafted.sessionId);
  assert.match(plain.reply, /^You said: still there\?/);
});

test('actions are listed oldest first, and ?session_id= narrows the list to one session', async () => {
  const owner = await t.userWithAgent();
  const first = await draftAction(t, owner, 'email', unique('first'));
  const second = await draftAction(t, owner, 'sms', unique('second'));
  const third = await draftAction(t, owner, 'email', unique('third'), first.sessionId);

  const all = (await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id);
  assert.deepEqual(all, [first.operationId, second.operationId, third.operationId]);

  const filtered = (await listActions(t, owner, `?session_id=${first.sessionId}`)).json().actions.map((a: { operation_id: string }) => a.operation_id);
  assert.deepEqual(filtered, [first.operationId, third.operationId]);
  const none = await listActions(t, owner, '?session_id=ses_doesnotexist000000000');
  assert.deepEqual(none.json(), { actions: [], has_more: false });
});

test('actions come a page at a time: limit, has_more, and after= the last operation_id, also once that action is settled', async () => {
  const owner = await t.userWithAgent();
  const drafted = [];
  for (const n of [1, 2, 3, 4, 5]) drafted.push((await draftAction(t, owner, 'email', unique(`paged ${n}`))).operationId);
  const ids = (res: { json(): { actions: Array<{ operation_id: string }> } }) => res.json().actions.map((a) => a.operation_id);

  const first = await listActions(t, owner, '?limit=2');
  assert.equal(first.statusCode, 200);
  assert.deepEqual(ids(first), drafted.slice(0, 2));
  assert.equal(first.json().has_more, true);
  // The client settles what it was shown, then asks for what follows the last one.
  assert.equal((await decideOne(t, owner, { operation_id: drafted[1]!, decision: 'reject' })).ok, true);
  const second = await listActions(t, owner, `?limit=2&after=${drafted[1]}`);
  assert.deepEqual(ids(second), drafted.slice(2, 4));
  assert.equal(second.json().has_more, true);
  const last = await listActions(t, owner, `?limit=2&after=${drafted[3]}`);
  assert.deepEqual(ids(last), [drafted[4]]);
  assert.equal(last.json().has_more, false);
  // A page that ends exactly at the end says so.
  assert.equal((await listActions(t, owner, `?limit=1&after=${drafted[3]}`)).json().has_more, false);
  // Without limit and after: the whole list; the rejected one is no longer listed.
  const all = await listActions(t, owner);
  assert.deepEqual(ids(all), [drafted[0], ...drafted.slice(2)]);
  assert.equal(all.json().has_more, false);
});

test('without limit and after every action is listed, as contract §5 gives the list (a client that does not page misses none); a page is 50 when only after is given', async () => {
  const owner = await t.userWithAgent();
  const { sessionId } = await draftAction(t, owner, 'email', unique('the first of 52'));
  for (let n = 2; n <= 52; n++) await draftAction(t, owner, 'email', unique(`number ${n}`), sessionId);
  const whole = (await listActions(t, owner)).json();
  assert.equal(whole.actions.length, 52);
  assert.equal(whole.has_more, false);
  const afterFirst = (await listActions(t, owner, `?after=${whole.actions[0].operation_id}`)).json();
  assert.equal(afterFirst.actions.length, 50);
  assert.equal(afterFirst.has_more, true);
  const rest = (await listActions(t, owner, `?after=${afterFirst.actions[49].operation_id}`)).json();
  assert.deepEqual(rest, { actions: [whole.actions[51]], has_more: false });
  const paged = (await listActions(t, owner, '?limit=51')).json();
  assert.equal(paged.actions.length, 51);
  assert.equal(paged.has_more, true);
});

test('approve: the action runs (executing, then done) and the agent replies "Done: <summary>", exactly once', async () => {
  const owner = await t.userWithAgent();
  const summary = unique('Send the report');
  const drafted = await draftAction(t, owner, 'email', summary);

  const result = await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'approve' });
  assert.deepEqual(result, { operation_id: drafted.operationId, ok: true, outcome: 'approved', also_approved: [] });

  const messages = await settledTranscript(t, owner, drafted.sessionId, 2);
  assert.deepEqual(agentTexts(messages).slice(1), [`Done: ${summary}`]);
  assert.deepEqual(await missionStatus(drafted.operationId), { action: 'done', mission: 'done' });
  assert.deepEqual((await listActions(t, owner)).json(), { actions: [], has_more: false });
});

test('reject with a reason re-plans: "Re-planned: <reason>"; the mission ends done', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'email', unique('Send to everyone'));
  const result = await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'reject', reason: '  Only to the team.  ' });
  assert.deepEqual(result, { operation_id: drafted.operationId, ok: true, outcome: 'rejected', also_approved: [] });

  const messages = await settledTranscript(t, owner, drafted.sessionId, 2);
  assert.deepEqual(agentTexts(messages).slice(1), ['Re-planned: Only to the team.']);
  assert.deepEqual(await missionStatus(drafted.operationId), { action: 'rejected', mission: 'done' });
});

for (const [what, entry] of [
  ['no reason', {}],
  ['a blank reason', { reason: '   ' }],
  ['a null reason', { reason: null }],
] as const) {
  test(`reject with ${what} stops the mission: "Stopped."`, async () => {
    const owner = await t.userWithAgent();
    const drafted = await draftAction(t, owner, 'email', unique('Delete the archive'));
    const result = await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'reject', ...entry });
    assert.equal(result.outcome, 'rejected');

    const messages = await settledTranscript(t, owner, drafted.sessionId, 2);
    assert.deepEqual(agentTexts(messages).slice(1), ['Stopped.']);
    assert.deepEqual(await missionStatus(drafted.operationId), { action: 'rejected', mission: 'stopped' });
  });
}

test('approve_same_type approves every pending action of that kind for that agent that the caller owns, and nothing else', async () => {
  const owner = await t.userWithAgent({ plan: 'pro' });
  const mine = { agentId: owner.agentId };
  const otherAgent = await t.runtime.services.agents.create(owner.id, { agent_name: 'Second agent' });
  const named = await draftAction(t, owner, 'email', unique('one'), mine);
  const sameKindOtherSession = await draftAction(t, owner, 'email', unique('two'), mine);
  const sameKindSameSession = await draftAction(t, owner, 'email', unique('three'), named.sessionId);
  const otherKind = await draftAction(t, owner, 'sms', unique('four'), named.sessionId);
  const onOtherAgent = await draftAction(t, owner, 'email', unique('five'), { agentId: otherAgent.agent_id });
  // Same kind, same agent, but another person's mission (a member of the owner's workspace).
  const member = await memberOfOwnersWorkspace(t, owner);
  const membersOwn = await draftAction(t, member, 'email', unique('six'), mine);

  const result = await decideOne(t, owner, { operation_id: named.operationId, decision: 'approve_same_type' });
  assert.equal(result.ok, true);
  assert.equal(result.outcome, 'approved');
  assert.deepEqual(result.also_approved, [sameKindOtherSession.operationId, sameKindSameSession.operationId]);

  const pending = (await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id);
  assert.deepEqual(pending, [otherKind.operationId, onOtherAgent.operationId]);
  const memberPending = (await listActions(t, member)).json().actions.map((a: { operation_id: string }) => a.operation_id);
  assert.deepEqual(memberPending, [membersOwn.operationId]);

  // Each approved action ran as its own continuation: exactly one "Done" per action, in its own session.
  const inNamed = await settledTranscript(t, owner, named.sessionId, 4);
  const doneInNamed = agentTexts(inNamed).filter((text) => text.startsWith('Done: '));
  assert.equal(doneInNamed.length, 2);
  const inOther = await settledTranscript(t, owner, sameKindOtherSession.sessionId, 2);
  assert.equal(agentTexts(inOther).filter((text) => text.startsWith('Done: ')).length, 1);
});

test('approve and approve_same_type ignore the entry\'s reason: it is not stored; a rejection\'s reason is', async () => {
  const owner = await t.userWithAgent();
  const approved = await draftAction(t, owner, 'email', unique('approved with a reason'));
  const named = await draftAction(t, owner, 'sms', unique('all of this kind'), approved.sessionId);
  const sibling = await draftAction(t, owner, 'sms', unique('the sibling'), approved.sessionId);
  const rejected = await draftAction(t, owner, 'chat', unique('rejected with a reason'), approved.sessionId);
  assert.equal((await decideOne(t, owner, { operation_id: approved.operationId, decision: 'approve', reason: 'ignored one' })).ok, true);
  const same = await decideOne(t, owner, { operation_id: named.operationId, decision: 'approve_same_type', reason: 'ignored two' });
  assert.deepEqual(same.also_approved, [sibling.operationId]);
  assert.equal((await decideOne(t, owner, { operation_id: rejected.operationId, decision: 'reject', reason: 'kept' })).ok, true);
  const rows = await t.runtime.store.db.selectFrom('actions').select(['id', 'decision', 'reason'])
    .where('id', 'in', [approved.operationId, named.operationId, sibling.operationId, rejected.operationId]).execute();
  const byId = new Map(rows.map((r) => [r.id, { decision: r.decision, reason: r.reason }]));
  assert.deepEqual(byId.get(approved.operationId), { decision: 'approve', reason: null });
  assert.deepEqual(byId.get(named.operationId), { decision: 'approve_same_type', reason: null });
  assert.deepEqual(byId.get(sibling.operationId), { decision: 'approve_same_type', reason: null });
  assert.deepEqual(byId.get(rejected.operationId), { decision: 'reject', reason: 'kept' });
  await settledTranscript(t, owner, approved.sessionId, 8);
});

test('POST /actions/decisions takes { "decisions": [...] } as well as a bare array', async () => {
  const owner = await t.userWithAgent();
  const a = await draftAction(t, owner, 'email', unique('wrapped a'));
  const b = await draftAction(t, owner, 'email', unique('wrapped b'));
  const res = await postDecisions(t, owner, { decisions: [
    { operation_id: a.operationId, decision: 'approve' },
    { operation_id: b.operationId, decision: 'reject', reason: 'not now' },
  ] });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json().results.map((r: { outcome: string }) => r.outcome), ['approved', 'rejected']);
});

test('several decisions in one request each end in exactly one continuation turn', async () => {
  const owner = await t.userWithAgent();
  const first = await draftAction(t, owner, 'email', unique('alpha'));
  const second = await draftAction(t, owner, 'email', unique('beta'), first.sessionId);
  const third = await draftAction(t, owner, 'email', unique('gamma'), first.sessionId);
  const res = await postDecisions(t, owner, [
    { operation_id: first.operationId, decision: 'approve' },
    { operation_id: second.operationId, decision: 'reject', reason: 'use chat' },
    { operation_id: third.operationId, decision: 'reject' },
  ]);
  assert.equal(res.statusCode, 200);
  const messages = await settledTranscript(t, owner, first.sessionId, 6);
  const continuations = agentTexts(messages).slice(3);
  assert.equal(continuations.length, 3);
  assert.deepEqual([...continuations].sort(), [`Done: ${first.reply.match(/"email": (.*) \(operation_id/)![1]}`, 'Re-planned: use chat', 'Stopped.'].sort());
});

test('/openapi.json documents the four missions routes, each entry field and each result shape', async () => {
  const doc = (await t.inject({ method: 'GET', url: '/openapi.json' })).json();
  const base = '/api/v1/api-channel';
  assert.equal(doc.paths[`${base}/actions`].get.operationId, 'listActions');
  assert.equal(doc.paths[`${base}/questions`].get.operationId, 'listQuestions');
  const decisions = doc.paths[`${base}/actions/decisions`].post;
  const answers = doc.paths[`${base}/questions/answers`].post;
  const bodyOf = (op: { requestBody: { content: Record<string, { schema: { anyOf: Array<{ items?: { properties: object } }> } }> } }) =>
    op.requestBody.content['application/json']!.schema.anyOf[0]!.items!.properties as Record<string, { description?: string }>;
  for (const [field, schema] of Object.entries(bodyOf(decisions))) assert.ok(schema.description, `decision ${field} is documented`);
  assert.deepEqual(Object.keys(bodyOf(decisions)).sort(), ['decision', 'operation_id', 'reason']);
  // The service takes a null reason (as no reason); the document says so.
  const reason = bodyOf(decisions).reason as { description: string; anyOf?: Array<{ type?: string }>; type?: string | string[] };
  const types = reason.anyOf ? reason.anyOf.map((s) => s.type) : [reason.type].flat();
  assert.ok(types.includes('null') && types.includes('string'), JSON.stringify(reason));
  assert.match(reason.description, /null/);
  for (const [field, schema] of Object.entries(bodyOf(answers))) assert.ok(schema.description, `answer ${field} is documented`);
  assert.deepEqual(Object.keys(bodyOf(answers)).sort(), ['request_id', 'text']);
  for (const id of ['PendingAction', 'OpenQuestion', 'DecisionResult', 'AnswerResult']) assert.ok(doc.components.schemas[id], id);
});
