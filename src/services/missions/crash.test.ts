import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { BuiltinBrain } from '../../brains/builtin.ts';
import { ToolRegistry } from '../../brains/tools.ts';
import { claimInTransaction, finishJob, getJob, requeueAllRunning } from '../../engine/queue-sql.ts';
import { startTestApp, type TestApp, withTestApp } from '../../testing/harness.ts';
import {
  actionState, agentTexts, answerOne, askQuestion, decideOne, draftAction, queueDrained, settledTranscript, transcript, unique,
} from '../../testing/missions.ts';
import { TurnWorker } from '../turn-worker.ts';

/**
 * An approved action is marked executing before its tool runs and done after, so an instance
 * that dies in between leaves it "executing"; whoever takes the job over runs the tool again
 * with the same idempotency key (the operation_id) and finishes it once.
 *
 * The app's own engine is stopped after the action is drafted, and this test plays two
 * runner lives over the real jobs table with real TurnWorkers: the first one's finishing
 * transaction never happens (the crash), the second one's does.
 */
let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('a crash between "executing" and "done" runs the tool again with the same idempotency key, then finishes once', async () => {
  const owner = await t.userWithAgent();
  const summary = unique('Charge the card');
  const drafted = await draftAction(t, owner, 'payment', summary);
  await t.runtime.engine.stop(0); // from here on, only this test runs jobs

  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'approve' })).ok, true);
  const { db } = t.runtime.store;
  const queued = await db.selectFrom('jobs').select(['id', 'agent_id']).where('session_id', '=', drafted.sessionId)
    .where('kind', '=', 'continuation').where('status', '=', 'queued').execute();
  assert.equal(queued.length, 1);
  const candidate = { id: Number(queued[0]!.id), agent_id: queued[0]!.agent_id };

  const runs: Array<{ kind: string; key: string }> = [];
  const tools = new ToolRegistry().register({
    kind: 'payment', needsPermission: true, description: 'Records each run (a test double for an outside service).',
    run: async (action, idempotencyKey) => { runs.push({ kind: action.kind, key: idempotencyKey }); },
  });
  const actionStatus = async () => (await actionState(t, drafted.operationId)).action;

  // First life: claims the job, marks the action executing, runs the tool, and dies before finishing.
  const firstClaim = await db.transaction().execute((trx) => claimInTransaction(trx, t.runtime.store, candidate, 'instance-that-dies', 60_000, 1));
  assert.ok(firstClaim);
  await new TurnWorker({ store: t.runtime.store, brain: new BuiltinBrain(), tools }).run(firstClaim, new AbortController().signal);
  assert.equal(await actionStatus(), 'executing');
  assert.deepEqual(runs, [{ kind: 'payment', key: drafted.operationId }]);
  assert.equal(agentTexts((await transcript(t, owner, drafted.sessionId)).messages).length, 1, 'nothing was written by the dead runner');

  // Restart: interrupted work goes back in line and a new runner takes it over.
  assert.equal(await requeueAllRunning(db), 1);
  const secondClaim = await db.transaction().execute((trx) => claimInTransaction(trx, t.runtime.store, candidate, 'instance-after-restart', 60_000, 1));
  assert.ok(secondClaim);
  assert.equal(secondClaim.attempts, 2);
  const finisher = await new TurnWorker({ store: t.runtime.store, brain: new BuiltinBrain(), tools }).run(secondClaim, new AbortController().signal);
  await t.runtime.engine.transact(async (tx) => {
    const outcome = await finisher(tx);
    assert.equal(await finishJob(tx.db, secondClaim.id, 'instance-after-restart', outcome.status, outcome.replyTurnId, t.runtime.store.clock.now()), true);
  });

  // The tool saw the retry as a retry: the same key both times.
  assert.deepEqual(runs, [{ kind: 'payment', key: drafted.operationId }, { kind: 'payment', key: drafted.operationId }]);
  assert.equal(await actionStatus(), 'done');
  assert.equal((await getJob(db, candidate.id))!.status, 'done');
  assert.equal((await actionState(t, drafted.operationId)).mission, 'done');
  assert.deepEqual(agentTexts((await transcript(t, owner, drafted.sessionId)).messages), [drafted.reply, `Done: ${summary}`]);
});

test('a continuation that keeps killing its runner is given up: the action ends failed, the mission stopped, with an error turn', async () => {
  await withTestApp(async (first) => {
    const owner = await first.userWithAgent();
    const drafted = await draftAction(first, owner, 'payment', unique('Crashes every time'));
    await first.runtime.engine.stop(0); // the continuation stays queued
    assert.equal((await decideOne(first, owner, { operation_id: drafted.operationId, decision: 'approve' })).outcome, 'approved');
    // Its runner died five times already (each claim counts an attempt), so the next claim is past maxAttempts.
    await first.runtime.store.db.updateTable('jobs').set({ attempts: 5 })
      .where('session_id', '=', drafted.sessionId).where('kind', '=', 'continuation').execute();

    const second = await first.restart(); // the next start takes it over
    try {
      await queueDrained(second);
      assert.deepEqual(await actionState(second, drafted.operationId), { action: 'failed', mission: 'stopped' });
      const messages = await settledTranscript(second, owner, drafted.sessionId, 2);
      assert.equal(messages.at(-1)!.error, 'agent_failed');
    } finally {
      await second.close();
    }
  });
});

test('the orphan sweep fails an action left executing after its job finished, and leaves one whose job is still open', async () => {
  await withTestApp(async (app) => {
    const owner = await app.userWithAgent();
    const stranded = await draftAction(app, owner, 'payment', unique('Stranded'));
    const inFlight = await draftAction(app, owner, 'payment', unique('Still in line'), { agentId: owner.agentId });
    await app.runtime.engine.stop(0);
    for (const drafted of [stranded, inFlight]) {
      assert.equal((await decideOne(app, owner, { operation_id: drafted.operationId, decision: 'approve' })).outcome, 'approved');
    }
    const { db } = app.runtime.store;
    // What a runner leaves when it cannot write even the failure (the engine's last resort): the
    // job is closed with no turn, the action still "executing".
    await db.updateTable('jobs').set({ status: 'failed', finished_at: new Date().toISOString() })
      .where('session_id', '=', stranded.sessionId).where('kind', '=', 'continuation').execute();
    await db.updateTable('actions').set({ status: 'executing' }).where('id', 'in', [stranded.operationId, inFlight.operationId]).execute();

    const swept = await app.runtime.services.housekeeping.runOnce();
    assert.equal(swept.actionsFailed, 1);
    assert.deepEqual(await actionState(app, stranded.operationId), { action: 'failed', mission: 'stopped' });
    assert.deepEqual(await actionState(app, inFlight.operationId), { action: 'executing', mission: 'active' });
  });
});

test('the sweep settles a mission left active after its continuation ended without a word (a rejection, an answer)', async () => {
  await withTestApp(async (app) => {
    const owner = await app.userWithAgent();
    const rejected = await draftAction(app, owner, 'email', unique('Rejected and stranded'));
    const asked = await askQuestion(app, owner, 'text', unique('Stranded question?'), { target: { agentId: owner.agentId } });
    const waiting = await draftAction(app, owner, 'email', unique('Still waiting'), { agentId: owner.agentId });
    await app.runtime.engine.stop(0);
    assert.equal((await decideOne(app, owner, { operation_id: rejected.operationId, decision: 'reject', reason: 'not now' })).outcome, 'rejected');
    assert.equal((await answerOne(app, owner, asked.requestId, 'an answer')).accepted, true);
    const { db } = app.runtime.store;
    const missionOf = async (sessionId: string) =>
      (await db.selectFrom('missions').select('status').where('session_id', '=', sessionId).executeTakeFirstOrThrow()).status;
    assert.equal(await missionOf(rejected.sessionId), 'active');
    assert.equal(await missionOf(asked.sessionId), 'active');
    // The engine's last resort: both continuations closed with no turn and no settling.
    await db.updateTable('jobs').set({ status: 'failed', finished_at: new Date().toISOString() })
      .where('session_id', 'in', [rejected.sessionId, asked.sessionId]).where('kind', '=', 'continuation').execute();

    const swept = await app.runtime.services.housekeeping.runOnce();
    assert.equal(swept.missionsSettled, 2);
    assert.equal(await missionOf(rejected.sessionId), 'stopped');
    assert.equal(await missionOf(asked.sessionId), 'stopped');
    assert.equal(await missionOf(waiting.sessionId), 'waiting', 'a mission waiting on a person is left alone');
  });
});
