import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../testing/conversation.ts';
import { startTestApp, TEST_DB, type TestApp } from '../testing/harness.ts';
import { findClaimable, findClaimableQuery } from './queue-sql.ts';

/**
 * A long line for one busy agent: finding what may start reads each queued job's place in its
 * line once, not the whole line ahead of it (a scan over Q jobs cost Q²/2 reads: 1.5 s at 2,800
 * on SQLite, run on every enqueue, every finished turn and every poll, until the server stalled).
 */
const BACKLOG = 2_000;
let t: TestApp;
let agentA: string;
let agentB: string;
const ids: { runningA: number; firstQueuedA: number; secondQueuedA: number; queuedB: number } = { runningA: 0, firstQueuedA: 0, secondQueuedA: 0, queuedB: 0 };

before(async () => {
  t = await startTestApp();
  const a = await t.userWithAgent();
  const b = await t.userWithAgent();
  agentA = a.agentId;
  agentB = b.agentId;
  const sessionA = (await send(t, a, { text: 'a session for the backlog' })).json().session_id as string;
  const sessionB = (await send(t, b, { text: 'a session for the other agent' })).json().session_id as string;
  await t.runtime.engine.stop(0); // both turns are done; from here on the queue holds only the rows below, and nothing runs them
  const { db } = t.runtime.store;
  const now = new Date().toISOString();
  const job = (agentId: string, sessionId: string, userId: string, status: 'queued' | 'running') => ({
    agent_id: agentId, session_id: sessionId, user_id: userId, kind: 'message' as const, payload: '{}', status, attempts: status === 'running' ? 1 : 0,
    lease_owner: status === 'running' ? 'elsewhere' : null, lease_expires_at: status === 'running' ? new Date(Date.now() + 3_600_000).toISOString() : null,
    user_turn_id: null, reply_turn_id: null, created_at: now, started_at: status === 'running' ? now : null, finished_at: null,
  });
  ids.runningA = (await db.insertInto('jobs').values(job(agentA, sessionA, a.id, 'running')).returning('id').executeTakeFirstOrThrow()).id;
  const queued = Array.from({ length: BACKLOG }, () => job(agentA, sessionA, a.id, 'queued'));
  let inserted: number[] = [];
  for (let i = 0; i < queued.length; i += 500) {
    inserted = inserted.concat((await db.insertInto('jobs').values(queued.slice(i, i + 500)).returning('id').execute()).map((r) => Number(r.id)));
  }
  [ids.firstQueuedA, ids.secondQueuedA] = inserted as [number, number];
  ids.queuedB = (await db.insertInto('jobs').values(job(agentB, sessionB, b.id, 'queued')).returning('id').executeTakeFirstOrThrow()).id;
});
after(async () => { await t.close(); });

test('behind a busy agent\'s long line, the other agent\'s job is found; the line moves in order', async () => {
  const { db } = t.runtime.store;
  assert.deepEqual(await findClaimable(db, 1, 10), [{ id: Number(ids.queuedB), agent_id: agentB }], 'one running: A waits, B may start');
  assert.deepEqual(await findClaimable(db, 2, 10), [
    { id: ids.firstQueuedA, agent_id: agentA }, { id: Number(ids.queuedB), agent_id: agentB },
  ], 'two per agent: the first of A\'s line may start too, and only it');
  assert.deepEqual((await findClaimable(db, 3, 2)).map((job) => job.id), [ids.firstQueuedA, ids.secondQueuedA], 'oldest first, up to the limit');
});

test('the scan reads each queued job\'s place once, not the line ahead of it (PostgreSQL\'s own count of rows read)', { skip: TEST_DB !== 'postgres' && 'PostgreSQL counts the rows each plan node read' }, async () => {
  const { db } = t.runtime.store;
  const compiled = findClaimableQuery(db, 1, 10).compile();
  const { rows } = await db.executeQuery<{ 'QUERY PLAN': unknown }>({
    ...compiled, sql: `explain (analyze, format json) ${compiled.sql}`,
  });
  let rowsRead = 0;
  const visit = (node: { 'Actual Rows'?: number; 'Actual Loops'?: number; 'Rows Removed by Filter'?: number; Plans?: unknown[] }) => {
    rowsRead += ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1);
    for (const child of node.Plans ?? []) visit(child as typeof node);
  };
  const plan = rows[0]!['QUERY PLAN'];
  visit((typeof plan === 'string' ? JSON.parse(plan) : plan)[0].Plan);
  // Linear: a few reads per queued job. Counting the line ahead of each would read about 2,000,000.
  assert.ok(rowsRead < 10 * BACKLOG, `${rowsRead} rows read for a line of ${BACKLOG}`);
});
