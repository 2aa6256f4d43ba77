import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { send } from '../testing/conversation.ts';
import { startTestApp, type TestApp } from '../testing/harness.ts';
import { renewLeases } from './queue-sql.ts';

let t: TestApp | undefined;
after(async () => { await t?.close(); });

test('thousands of running jobs have their leases renewed, in slices; another runner\'s job is not renewed', async () => {
  t = await startTestApp();
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'a session for the leases' })).json().session_id as string;
  await t.runtime.engine.stop(0); // nothing runs these rows: they are the test's
  const { db } = t.runtime.store;
  const soon = new Date(Date.now() + 1000).toISOString();
  const job = (owner: string) => ({
    agent_id: u.agentId, session_id: sessionId, user_id: u.id, kind: 'message' as const, payload: '{}', status: 'running' as const, attempts: 1,
    lease_owner: owner, lease_expires_at: soon, user_turn_id: null, reply_turn_id: null, created_at: soon, started_at: soon, finished_at: null,
  });
  const mine: number[] = [];
  for (let i = 0; i < 1_200; i += 400) {
    const rows = await db.insertInto('jobs').values(Array.from({ length: 400 }, () => job('me'))).returning('id').execute();
    mine.push(...rows.map((row) => Number(row.id)));
  }
  const theirs = Number((await db.insertInto('jobs').values(job('them')).returning('id').executeTakeFirstOrThrow()).id);
  const now = Date.now();
  const renewed = await renewLeases(db, 'me', [...mine, theirs], 60_000, now);
  assert.deepEqual(renewed.sort((a, b) => a - b), mine, 'every one of mine, and only mine');
  const leases = await db.selectFrom('jobs').select(['id', 'lease_expires_at']).where('id', 'in', [mine[0]!, mine.at(-1)!, theirs]).orderBy('id').execute();
  assert.deepEqual(leases.map((row) => row.lease_expires_at), [new Date(now + 60_000).toISOString(), new Date(now + 60_000).toISOString(), soon]);
});
