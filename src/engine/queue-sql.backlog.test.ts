import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql, type RawBuilder } from 'kysely';
import { send } from '../testing/conversation.ts';
import { startTestApp, TEST_DB, type TestApp } from '../testing/harness.ts';
import { claimInTransaction, findClaimable, findClaimableQuery, finishedJobs, isStartableQuery, oldestQueuedQuery } from './queue-sql.ts';

/**
 * A long line for one busy agent: finding what may start looks at the head of each agent's line,
 * not at every job in it. Counting the line ahead of each queued job reads some Q²/2 rows for a
 * line of Q, on every enqueue, every finished turn and every poll; even reading each queued job
 * once makes every scan grow with the backlog.
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

test('the scan and a claim\'s check read the heads of the lines, not the jobs behind them (PostgreSQL\'s own count of rows read)', { skip: TEST_DB !== 'postgres' && 'PostgreSQL counts the rows each plan node read' }, async () => {
  const { db } = t.runtime.store;
  await sql`analyze jobs`.execute(db); // the statistics autovacuum gathers in production (with them, a careless plan reads the whole table)
  const rowsRead = async (query: RawBuilder<unknown>) => {
    const compiled = query.compile(db);
    const { rows } = await db.executeQuery<{ 'QUERY PLAN': unknown }>({ ...compiled, sql: `explain (analyze, format json) ${compiled.sql}` });
    let read = 0;
    const visit = (node: { 'Actual Rows'?: number; 'Actual Loops'?: number; 'Rows Removed by Filter'?: number; Plans?: unknown[] }) => {
      read += ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1);
      for (const child of node.Plans ?? []) visit(child as typeof node);
    };
    const plan = rows[0]!['QUERY PLAN'];
    visit((typeof plan === 'string' ? JSON.parse(plan) : plan)[0].Plan);
    return read;
  };
  // A few reads per agent with a line. Reading each queued job once read over 2,000; counting the
  // line ahead of each, about 2,000,000.
  const walk = await rowsRead(findClaimableQuery(1, 10));
  assert.ok(walk < 100, `the walk over the lines' heads read ${walk} rows for a line of ${BACKLOG}`);
  // A few reads per job looked at (32 of them).
  const look = await rowsRead(oldestQueuedQuery(1, 32));
  assert.ok(look < 32 * 12, `the look at the oldest queued jobs read ${look} rows`);
  // B's job is newer than all of A's line: counting what is ahead of it by id read that line.
  const check = await rowsRead(isStartableQuery(1, Number(ids.queuedB)));
  assert.ok(check < 50, `checking B's job read ${check} rows`);
});

test('the scan and a claim\'s check reach the jobs table only through index searches (SQLite\'s plans)', { skip: TEST_DB !== 'sqlite' && 'SQLite\'s query plan' }, async () => {
  const { db } = t.runtime.store;
  const planOf = async (query: RawBuilder<unknown>) => {
    const compiled = query.compile(db);
    return (await db.executeQuery<{ detail: string }>({ ...compiled, sql: `explain query plan ${compiled.sql}` })).rows.map((row) => row.detail);
  };
  const scansOfJobs = (details: string[]) => details.filter((detail) => /^SCAN (?:jobs|j|q|r|a)\b/.test(detail)); // the statements' names for the jobs table
  const sorts = (details: string[]) => details.filter((detail) => detail.includes('TEMP B-TREE'));
  const walk = await planOf(findClaimableQuery(1, 10));
  // The one scan allowed finds the first line's head: the index's first queued entry (limit 1).
  assert.deepEqual(scansOfJobs(walk), ['SCAN q USING COVERING INDEX jobs_line'], walk.join('\n'));
  // One sort, of the heads found; a sort inside a step would read a whole line to order it.
  assert.deepEqual(sorts(walk), ['USE TEMP B-TREE FOR ORDER BY'], walk.join('\n'));
  const look = await planOf(oldestQueuedQuery(1, 32));
  assert.deepEqual(scansOfJobs(look), ['SCAN jobs USING INDEX jobs_queued'], look.join('\n')); // in id order, up to the limit
  assert.deepEqual(sorts(look), [], look.join('\n'));
  const check = await planOf(isStartableQuery(1, Number(ids.queuedB)));
  assert.deepEqual([...scansOfJobs(check), ...sorts(check)], [], check.join('\n'));
});

test('several lines at once: each agent starts as many as it has room for, the first of its line first, and a claim checks the same', async () => {
  const { db } = t.runtime.store;
  const now = new Date().toISOString();
  const add = async (agentId: string, status: 'queued' | 'running') => Number((await db.insertInto('jobs').values({
    agent_id: agentId, session_id: 'ses_lines', user_id: 'usr_lines', kind: 'message', payload: '{}', status, attempts: 0,
    lease_owner: status === 'running' ? 'elsewhere' : null, lease_expires_at: status === 'running' ? new Date(Date.now() + 3_600_000).toISOString() : null,
    user_turn_id: null, reply_turn_id: null, created_at: now, started_at: null, finished_at: null,
  }).returning('id').executeTakeFirstOrThrow()).id);
  // Two may run per agent. Idle agent X has three queued; Y runs one and has two queued; Z runs two.
  const x = [await add('agt_lines_x', 'queued'), await add('agt_lines_x', 'queued'), await add('agt_lines_x', 'queued')];
  await add('agt_lines_y', 'running');
  const y = [await add('agt_lines_y', 'queued'), await add('agt_lines_y', 'queued')];
  await add('agt_lines_z', 'running');
  await add('agt_lines_z', 'running');
  const z = await add('agt_lines_z', 'queued');
  // W's first job was put back in line (its runner stopped) after the next one started: one runs.
  const w = await add('agt_lines_w', 'queued');
  await add('agt_lines_w', 'running');
  try {
    const expected = [ids.firstQueuedA, Number(ids.queuedB), x[0]!, x[1]!, y[0]!, w].sort((p, q) => p - q);
    assert.deepEqual((await findClaimable(db, 2, 100)).map((job) => job.id), expected);
    assert.deepEqual((await findClaimable(db, 1, 100)).map((job) => job.id), [Number(ids.queuedB), x[0]!], 'one per agent: only the idle lines');
    const claim = (id: number, agentId: string) => db.transaction().execute((trx) => claimInTransaction(trx, t.runtime.store, { id, agent_id: agentId }, 'lines-test', 60_000, 2));
    assert.equal(await claim(x[2]!, 'agt_lines_x'), null, 'third in an idle line of an agent that may run two');
    assert.equal(await claim(y[1]!, 'agt_lines_y'), null, 'second in line behind a running job');
    assert.equal(await claim(z, 'agt_lines_z'), null, 'the agent runs two already');
    assert.equal((await claim(x[1]!, 'agt_lines_x'))?.status, 'running', 'second in an idle line');
    assert.equal((await claim(w, 'agt_lines_w'))?.status, 'running', 'the first in line, with one running: room for two');
  } finally {
    await db.deleteFrom('jobs').where('agent_id', 'like', 'agt_lines_%').execute();
  }
});

test('the finished jobs among more waiting requests than a statement takes parameters (70,000) are found, not an error', async () => {
  const { db } = t.runtime.store;
  const done = (await db.selectFrom('jobs').select('id').where('status', '=', 'done').execute()).map((row) => Number(row.id));
  assert.equal(done.length, 2, 'the two turns sent before the backlog');
  const waitedOn = [...Array.from({ length: 70_000 }, (_, i) => 10_000_000 + i), ...done, ids.runningA, ids.firstQueuedA];
  const finished = await finishedJobs(db, waitedOn);
  assert.deepEqual(finished.map((job) => job.id).sort((a, b) => a - b), done.sort((a, b) => a - b));
});
