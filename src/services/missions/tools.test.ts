import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ToolRegistry } from '../../brains/tools.ts';
import { startTestApp, type TestApp } from '../../testing/harness.ts';
import {
  actionState, agentTexts, decideOne, draftAction, listActions, queueDrained, send, settledTranscript, unique,
} from '../../testing/missions.ts';

/**
 * The tool registry decides what a drafted action needs (issue: needsPermission was never
 * read), and an approved action always reaches a final state, also when its tool fails.
 * This app runs the built-in agent over a registry of its own, with no fallback: a kind that
 * no tool runs has no tool at all.
 */
const runs: Array<{ kind: string; key: string }> = [];
let t: TestApp;
before(async () => {
  const tools = new ToolRegistry()
    .register({
      kind: 'lookup', needsPermission: false, description: 'Reads something; no person needs to agree.',
      run: async (action, idempotencyKey) => { runs.push({ kind: action.kind, key: idempotencyKey }); },
    })
    .register({
      kind: 'payment', needsPermission: true, description: 'Always declined (a tool that throws).',
      run: async () => { throw new Error('card declined'); },
    })
    .register({
      kind: 'wipe', needsPermission: true, description: 'Deletes the conversation it was asked from while it runs.',
      run: async (action) => {
        const row = await t.runtime.store.db.selectFrom('actions').select('session_id').where('id', '=', action.operationId).executeTakeFirstOrThrow();
        await t.runtime.store.db.deleteFrom('sessions').where('id', '=', row.session_id).execute();
      },
    });
  t = await startTestApp({}, { tools });
});
after(async () => { await t.close(); });

test('an action whose tool needs no permission runs at once: nobody is asked, "Done: <summary>" follows, exactly once', async () => {
  const owner = await t.userWithAgent();
  const summary = unique('Find the order');
  const drafted = await draftAction(t, owner, 'lookup', summary);
  assert.match(drafted.reply, /needs no permission/);
  assert.doesNotMatch(drafted.reply, /Approve or reject/);

  const messages = await settledTranscript(t, owner, drafted.sessionId, 2);
  assert.deepEqual(agentTexts(messages), [drafted.reply, `Done: ${summary}`]);
  assert.deepEqual(runs.filter((r) => r.key === drafted.operationId), [{ kind: 'lookup', key: drafted.operationId }]);
  assert.deepEqual(await actionState(t, drafted.operationId), { action: 'done', mission: 'done' });
  assert.deepEqual((await listActions(t, owner)).json(), { actions: [], has_more: false });
  // It was never a person's decision: none is recorded, and it cannot be decided now.
  const row = await t.runtime.store.db.selectFrom('actions').select(['decision', 'reason']).where('id', '=', drafted.operationId).executeTakeFirstOrThrow();
  assert.deepEqual({ ...row }, { decision: null, reason: null });
  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'reject' })).error.code, 'already_settled');
  const jobs = await t.runtime.store.db.selectFrom('jobs').select(['kind', 'status']).where('session_id', '=', drafted.sessionId).orderBy('id').execute();
  assert.deepEqual(jobs.map((j) => `${j.kind}:${j.status}`), ['message:done', 'continuation:done']);
});

test('an action of a kind that no tool can run is refused when drafted: the agent says so and nothing waits', async () => {
  const owner = await t.userWithAgent();
  const sent = await send(t, owner, `!action teleport ${unique('Beam me up')}`);
  assert.match(sent.reply, /no tool can run "teleport" actions/i);
  assert.doesNotMatch(sent.reply, /op_/);
  assert.deepEqual((await listActions(t, owner)).json(), { actions: [], has_more: false });
  const rows = await t.runtime.store.db.selectFrom('actions').select('id').where('owner_user_id', '=', owner.id).execute();
  assert.equal(rows.length, 0);
  const missions = await t.runtime.store.db.selectFrom('missions').select('id').where('owner_user_id', '=', owner.id).execute();
  assert.equal(missions.length, 0);
});

test('an approved action whose tool throws ends failed, its mission stopped, with an error turn', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'payment', unique('Pay the invoice'));
  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'approve' })).outcome, 'approved');
  const messages = await settledTranscript(t, owner, drafted.sessionId, 2);
  assert.equal(messages.at(-1)!.role, 'agent');
  assert.equal(messages.at(-1)!.error, 'agent_failed');
  assert.deepEqual(await actionState(t, drafted.operationId), { action: 'failed', mission: 'stopped' });
});

test('an approved action whose session is deleted while its tool runs still ends failed (no turn can be written)', async () => {
  const owner = await t.userWithAgent();
  const drafted = await draftAction(t, owner, 'wipe', unique('Wipe it'));
  assert.equal((await decideOne(t, owner, { operation_id: drafted.operationId, decision: 'approve' })).outcome, 'approved');
  await queueDrained(t);
  assert.deepEqual(await actionState(t, drafted.operationId), { action: 'failed', mission: 'stopped' });
  const session = await t.runtime.store.db.selectFrom('sessions').select('id').where('id', '=', drafted.sessionId).executeTakeFirst();
  assert.equal(session, undefined, 'the session is gone');
  const job = await t.runtime.store.db.selectFrom('jobs').select('status').where('session_id', '=', drafted.sessionId)
    .where('kind', '=', 'continuation').executeTakeFirstOrThrow();
  assert.equal(job.status, 'failed');
});
