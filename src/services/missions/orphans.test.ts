import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { BuiltinBrain } from '../../brains/builtin.ts';
import { builtinToolRegistry } from '../../brains/tools.ts';
import { claimInTransaction, finishJob } from '../../engine/queue-sql.ts';
import { startTestApp, type TestApp, withTestApp } from '../../testing/harness.ts';
import {
  actionState, askQuestion, decideOne, answerOne, draftAction, listActions, listQuestions, memberOfOwnersWorkspace, queueDrained, unique,
} from '../../testing/missions.ts';
import { TurnWorker } from '../turn-worker.ts';

/**
 * No orphans (issue 4): a mission whose session or agent is gone, or whose owner can no longer
 * act (no longer a member of the agent's workspace), is closed with its pending actions and
 * open questions instead of lingering in anyone's list.
 */
let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const statusOf = async (missionOf: { operationId?: string; requestId?: string }) => {
  const db = t.runtime.store.db;
  if (missionOf.operationId) {
    return { ...(await db.selectFrom('actions').innerJoin('missions', 'missions.id', 'actions.mission_id')
      .select(['actions.status as item', 'missions.status as mission']).where('actions.id', '=', missionOf.operationId).executeTakeFirstOrThrow()) };
  }
  return { ...(await db.selectFrom('questions').innerJoin('missions', 'missions.id', 'questions.mission_id')
    .select(['questions.status as item', 'missions.status as mission']).where('questions.id', '=', missionOf.requestId!).executeTakeFirstOrThrow()) };
};

test('an owner who leaves the agent\'s workspace: their missions there close, vanish from lists, and cannot be settled', async () => {
  const workspaceOwner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, workspaceOwner);
  const target = { agentId: workspaceOwner.agentId };
  const action = await draftAction(t, member, 'email', unique('from a member'), target);
  const question = await askQuestion(t, member, 'text', unique('Member asks?'), { target });
  // The member also asks the workspace owner: that question must leave the owner's list as well.
  const askedOfOwner = await askQuestion(t, member, 'text', unique('Owner, a word?'), { of: workspaceOwner.email, target });
  assert.equal((await listQuestions(t, workspaceOwner)).json().questions.length, 1);

  await t.runtime.store.db.deleteFrom('memberships').where('workspace_id', '=', member.workspaceId).where('user_id', '=', member.id).execute();

  assert.deepEqual((await listActions(t, member)).json(), { actions: [], has_more: false });
  assert.deepEqual((await listQuestions(t, member)).json(), { questions: [], has_more: false });
  assert.deepEqual((await listQuestions(t, workspaceOwner)).json(), { questions: [], has_more: false });
  assert.deepEqual(await statusOf({ operationId: action.operationId }), { item: 'closed', mission: 'closed' });
  assert.deepEqual(await statusOf({ requestId: question.requestId }), { item: 'closed', mission: 'closed' });
  assert.deepEqual(await statusOf({ requestId: askedOfOwner.requestId }), { item: 'closed', mission: 'closed' });
  assert.equal((await decideOne(t, member, { operation_id: action.operationId, decision: 'approve' })).error.code, 'not_found');
  assert.equal((await answerOne(t, workspaceOwner, askedOfOwner.requestId, 'sure')).error.code, 'not_found');
  // Nothing was enqueued for the closed missions.
  const continuations = await t.runtime.store.db.selectFrom('jobs').select('id').where('user_id', '=', member.id).where('kind', '=', 'continuation').execute();
  assert.equal(continuations.length, 0);
});

test('deciding closes a mission lazily when its owner can no longer act, without waiting for a list', async () => {
  const workspaceOwner = await t.userWithAgent();
  const member = await memberOfOwnersWorkspace(t, workspaceOwner);
  const action = await draftAction(t, member, 'email', unique('decided after leaving'), { agentId: workspaceOwner.agentId });
  await t.runtime.store.db.deleteFrom('memberships').where('workspace_id', '=', member.workspaceId).where('user_id', '=', member.id).execute();
  assert.equal((await decideOne(t, member, { operation_id: action.operationId, decision: 'approve' })).error.code, 'not_found');
  assert.deepEqual(await statusOf({ operationId: action.operationId }), { item: 'closed', mission: 'closed' });
});

test('a mission whose session is gone is closed', async () => {
  const owner = await t.userWithAgent();
  const action = await draftAction(t, owner, 'email', unique('session goes'));
  const question = await askQuestion(t, owner, 'text', unique('Session goes?'), { target: action.sessionId });
  const kept = await draftAction(t, owner, 'email', unique('session stays'), { agentId: owner.agentId });
  await t.runtime.store.db.deleteFrom('sessions').where('id', '=', action.sessionId).execute();

  assert.deepEqual((await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id), [kept.operationId]);
  assert.deepEqual((await listQuestions(t, owner)).json(), { questions: [], has_more: false });
  assert.deepEqual(await statusOf({ operationId: action.operationId }), { item: 'closed', mission: 'closed' });
  assert.deepEqual(await statusOf({ requestId: question.requestId }), { item: 'closed', mission: 'closed' });
  assert.deepEqual(await statusOf({ operationId: kept.operationId }), { item: 'pending', mission: 'waiting' });
  // approve_same_type from the live action skips the closed one.
  const result = await decideOne(t, owner, { operation_id: kept.operationId, decision: 'approve_same_type' });
  assert.deepEqual(result.also_approved, []);
});

test('closeOrphanedMissions() sweeps every orphan (agent gone) and leaves healthy missions alone', async () => {
  const owner = await t.userWithAgent({ plan: 'pro' });
  const doomedAgent = await t.runtime.services.agents.create(owner.id, { agent_name: 'Doomed' });
  const doomed = await draftAction(t, owner, 'email', unique('agent goes'), { agentId: doomedAgent.agent_id });
  const doomedQuestion = await askQuestion(t, owner, 'yesno', unique('Agent goes?'), { target: { agentId: doomedAgent.agent_id } });
  const healthy = await draftAction(t, owner, 'email', unique('agent stays'), { agentId: owner.agentId });
  await t.runtime.store.db.deleteFrom('agents').where('id', '=', doomedAgent.agent_id).execute();

  const closed = await t.runtime.services.missions.closeOrphanedMissions();
  assert.ok(closed >= 2, `closed ${closed}`);
  assert.deepEqual(await statusOf({ operationId: doomed.operationId }), { item: 'closed', mission: 'closed' });
  assert.deepEqual(await statusOf({ requestId: doomedQuestion.requestId }), { item: 'closed', mission: 'closed' });
  assert.deepEqual(await statusOf({ operationId: healthy.operationId }), { item: 'pending', mission: 'waiting' });
  assert.equal(await t.runtime.services.missions.closeOrphanedMissions(), 0);
  assert.deepEqual((await listActions(t, owner)).json().actions.map((a: { operation_id: string }) => a.operation_id), [healthy.operationId]);
});

test('continuations queued before their mission was closed do not reopen it (a rejection with a reason, an answer)', async () => {
  await withTestApp(async (app) => {
    const workspaceOwner = await app.userWithAgent();
    const member = await memberOfOwnersWorkspace(app, workspaceOwner);
    const target = { agentId: workspaceOwner.agentId };
    const rejected = await draftAction(app, member, 'email', unique('re-planned after closing'), target);
    const answered = await askQuestion(app, member, 'text', unique('Answered after closing?'), { target });
    await app.runtime.engine.stop(0); // the continuations stay queued
    assert.equal((await decideOne(app, member, { operation_id: rejected.operationId, decision: 'reject', reason: 'differently' })).ok, true);
    assert.equal((await answerOne(app, member, answered.requestId, 'an answer')).accepted, true);
    await app.runtime.store.db.deleteFrom('memberships').where('workspace_id', '=', member.workspaceId).where('user_id', '=', member.id).execute();
    assert.equal(await app.runtime.services.missions.closeOrphanedMissions(), 2);

    const second = await app.restart(); // runs the queued continuations
    try {
      await queueDrained(second);
      const { db } = second.runtime.store;
      const missions = await db.selectFrom('missions').select('status').where('owner_user_id', '=', member.id).execute();
      assert.deepEqual(missions.map((m) => m.status), ['closed', 'closed']);
      const texts = (await db.selectFrom('turns').select('text').where('session_id', 'in', [rejected.sessionId, answered.sessionId])
        .where('role', '=', 'agent').execute()).map((r) => r.text);
      assert.ok(!texts.some((text) => /^(Re-planned|Noted):/.test(text)), JSON.stringify(texts));
    } finally {
      await second.close();
    }
  });
});

test('a mission closed while its continuation runs stays closed when the continuation is recorded', async () => {
  await withTestApp(async (app) => {
    const workspaceOwner = await app.userWithAgent();
    const member = await memberOfOwnersWorkspace(app, workspaceOwner);
    const drafted = await draftAction(app, member, 'email', unique('closed mid-run'), { agentId: workspaceOwner.agentId });
    await app.runtime.engine.stop(0); // from here on, only this test runs jobs
    assert.equal((await decideOne(app, member, { operation_id: drafted.operationId, decision: 'reject', reason: 'later' })).ok, true);
    const { db } = app.runtime.store;
    const queued = await db.selectFrom('jobs').select(['id', 'agent_id']).where('session_id', '=', drafted.sessionId)
      .where('kind', '=', 'continuation').executeTakeFirstOrThrow();
    const claimed = await db.transaction().execute((trx) =>
      claimInTransaction(trx, app.runtime.store, { id: Number(queued.id), agent_id: queued.agent_id }, 'by-hand', 60_000, 1));
    assert.ok(claimed);
    // run() sees a live mission and the brain re-plans; then the sweep closes the mission; then the outcome is written.
    const worker = new TurnWorker({ store: app.runtime.store, brain: new BuiltinBrain(), tools: builtinToolRegistry() });
    const finisher = await worker.run(claimed, new AbortController().signal);
    await db.deleteFrom('memberships').where('workspace_id', '=', member.workspaceId).where('user_id', '=', member.id).execute();
    assert.equal(await app.runtime.services.missions.closeOrphanedMissions(), 1);
    await app.runtime.engine.transact(async (tx) => {
      const outcome = await finisher(tx);
      assert.equal(await finishJob(tx.db, claimed.id, 'by-hand', outcome.status, outcome.replyTurnId, app.runtime.store.clock.now()), true);
    });
    assert.equal((await actionState(app, drafted.operationId)).mission, 'closed');
  });
});
