import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { pollTranscript, send } from '../testing/conversation.ts';
import { freshDatabase, startTestApp, TEST_DB, type TestApp } from '../testing/harness.ts';
import { sample, scrape } from '../testing/metrics.ts';

async function jobsOf(t: TestApp, agentId: string) {
  const rows = await t.runtime.store.db.selectFrom('jobs').select(['id', 'session_id', 'status', 'started_at', 'finished_at', 'lease_owner'])
    .where('agent_id', '=', agentId).orderBy('id').execute();
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

async function allIdle(t: TestApp, agentId: string): Promise<void> {
  for (let i = 0; i < 1500; i++) {
    const open = (await jobsOf(t, agentId)).filter((j) => j.status === 'queued' || j.status === 'running');
    if (open.length === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('jobs never finished');
}

describe('turn engine: one agent, one turn at a time, FIFO', () => {
  const apps: TestApp[] = [];
  after(async () => { for (const app of apps) await app.close(); });

  test('turns of one agent run one at a time in arrival order, across all its sessions', async () => {
    const t = await startTestApp({ waitCeilingMs: 0 });
    apps.push(t);
    const u = await t.userWithAgent();
    const sessions: string[] = [];
    // Five sessions, then a second message in each, interleaved: 10 turns in one line.
    for (let i = 0; i < 5; i++) sessions.push((await send(t, u, { text: `!sleep 20 first ${i}` })).json().session_id);
    for (let i = 0; i < 5; i++) await send(t, u, { text: `second ${i}`, session_id: sessions[i] });
    await allIdle(t, u.agentId);
    const jobs = await jobsOf(t, u.agentId);
    assert.equal(jobs.length, 10);
    for (let i = 1; i < jobs.length; i++) {
      assert.ok(jobs[i]!.started_at! >= jobs[i - 1]!.finished_at!, `job ${jobs[i]!.id} started before ${jobs[i - 1]!.id} finished`);
    }
    // Every session got its replies, in order.
    for (let i = 0; i < 5; i++) {
      const page = await pollTranscript(t, u, sessions[i]!, (b) => b.messages.length === 4);
      const replies = page.messages.filter((m: any) => m.role === 'agent').map((m: any) => m.text);
      assert.deepEqual(replies, [`You said: first ${i}`, `You said: second ${i}`]);
    }
  });

  // Long sleeps, so that even on a loaded machine the second send lands while the first runs.
  test('different agents run in parallel', async () => {
    const t = await startTestApp({ waitCeilingMs: 0 });
    apps.push(t);
    const u = await t.userWithAgent({ plan: 'pro' });
    const other = await t.runtime.services.agents.create(u.id, { agent_name: 'Parallel' });
    await send(t, u, { text: '!sleep 2000 a', agent_id: u.agentId });
    await send(t, u, { text: '!sleep 2000 b', agent_id: other.agent_id });
    await allIdle(t, u.agentId);
    await allIdle(t, other.agent_id);
    const [a] = await jobsOf(t, u.agentId);
    const [b] = await jobsOf(t, other.agent_id);
    assert.ok(a!.started_at! < b!.finished_at! && b!.started_at! < a!.finished_at!, 'the two turns overlapped');
  });

  test('AGENT_CONCURRENCY lets one agent run several turns at once', async () => {
    const t = await startTestApp({ waitCeilingMs: 0, agentConcurrency: 2 });
    apps.push(t);
    const u = await t.userWithAgent();
    await send(t, u, { text: '!sleep 1500 one' });
    await send(t, u, { text: '!sleep 1500 two' });
    await send(t, u, { text: '!sleep 10 three' });
    await allIdle(t, u.agentId);
    const [one, two, three] = await jobsOf(t, u.agentId);
    assert.ok(one!.started_at! < two!.finished_at! && two!.started_at! < one!.finished_at!, 'two at once');
    assert.ok(three!.started_at! >= one!.finished_at! || three!.started_at! >= two!.finished_at!, 'the third waited for a slot');
  });

  test('RUNNER_CONCURRENCY caps the turns one runner runs at once: another agent\'s turn waits queued for the slot, counted and warned of', async () => {
    const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
    const t = await startTestApp({ waitCeilingMs: 0, runnerConcurrency: 1 }, { logWarning: (fields, message) => warnings.push({ fields, message }) });
    apps.push(t);
    const first = await t.userWithAgent();
    const second = await t.userWithAgent();
    const third = await t.userWithAgent();
    assert.equal(sample(await scrape(t), 'turns_waited_for_slot_total', { kind: 'message' }), 0);
    assert.equal((await send(t, first, { text: '!sleep 1000 first' })).json().status, 'processing');
    assert.equal((await send(t, second, { text: 'second' })).json().status, 'queued', 'its agent is free, but the one slot is taken');
    assert.equal((await send(t, third, { text: 'third' })).json().status, 'queued');
    assert.equal(sample(await scrape(t), 'turns_waited_for_slot_total', { kind: 'message' }), 2);
    assert.deepEqual(warnings.map((w) => w.fields), [{ runnerConcurrency: 1, waitedSinceLastWarning: 1 }], 'one warning, not one a turn');
    assert.match(warnings[0]!.message, /every RUNNER_CONCURRENCY slot is busy/);
    await allIdle(t, third.agentId);
    await allIdle(t, first.agentId);
    await allIdle(t, second.agentId);
    const [a] = await jobsOf(t, first.agentId);
    const [b] = await jobsOf(t, second.agentId);
    assert.ok(b!.started_at! >= a!.finished_at!, 'the second started once the first had finished');
  });

  test('a long turn of one agent does not hold up another agent (runner concurrency)', async () => {
    const t = await startTestApp({ waitCeilingMs: 5000 });
    apps.push(t);
    const slow = await t.userWithAgent();
    const fast = await t.userWithAgent();
    const pending = send(t, slow, { text: '!sleep 1500' }, { Prefer: 'wait=0' });
    await pending;
    const quick = await send(t, fast, { text: 'quick' });
    assert.equal(quick.json().status, 'completed');
    const slowJobs = await jobsOf(t, slow.agentId);
    assert.equal(slowJobs[0]!.status, 'running', 'the slow turn is still running while the fast one completed');
    await allIdle(t, slow.agentId);
  });
});

/**
 * Did `later` start once `earlier` had finished? Each instance writes these times by its own
 * reading of the database's clock (see SharedClock), and two readings agree only to within the
 * round trips they were measured over: so to within the two instances' disagreement, and the
 * millisecond the stored times are cut to.
 */
function startedAfter(later: { started_at: string | null }, earlier: { finished_at: string | null }, a: TestApp, b: TestApp): boolean {
  const disagreementMs = Math.abs(a.runtime.store.clock.now() - b.runtime.store.clock.now()) + 1;
  return Date.parse(later.started_at!) >= Date.parse(earlier.finished_at!) - disagreementMs;
}

describe('turn engine on PostgreSQL: several instances share one queue', { skip: TEST_DB !== 'postgres' && 'PostgreSQL pass only' }, () => {
  test('two instances: FIFO per agent holds, each turn runs once, and a waiter on one instance is woken by the other', async () => {
    const database = await freshDatabase();
    const a = await startTestApp({ waitCeilingMs: 10_000, instanceId: 'instance-a' }, { database });
    const b = await startTestApp({ waitCeilingMs: 10_000, instanceId: 'instance-b' }, { database });
    try {
      const u = await a.userWithAgent({ plan: 'pro' });
      const agents = [u.agentId];
      for (let i = 0; i < 3; i++) agents.push((await a.runtime.services.agents.create(u.id, { agent_name: `Agent ${i}` })).agent_id);
      // Many sends, alternating instances, to four agents; all wait for their replies.
      const results = await Promise.all(Array.from({ length: 24 }, (_, i) =>
        send(i % 2 ? b : a, u, { text: `!sleep 30 n${i}`, agent_id: agents[i % 4]! })));
      for (const [i, r] of results.entries()) {
        assert.equal(r.statusCode, 200, r.body);
        assert.equal(r.json().reply, `You said: n${i}`);
      }
      for (const agentId of agents) {
        // Concurrent requests on two instances may commit in another order than their ids were
        // drawn, so order by start: no two turns of one agent ever overlap.
        const jobs = await a.runtime.store.db.selectFrom('jobs').selectAll().where('agent_id', '=', agentId).orderBy('started_at').execute();
        assert.equal(jobs.length, 6);
        for (let i = 1; i < jobs.length; i++) assert.ok(startedAfter(jobs[i]!, jobs[i - 1]!, a, b), 'one at a time per agent');
        for (const job of jobs) assert.equal(job.attempts, 1, 'claimed exactly once');
      }
      const turns = await a.runtime.store.db.selectFrom('turns').select(['job_id']).where('role', '=', 'agent').execute();
      assert.equal(turns.length, 24, 'exactly one reply per turn');
    } finally {
      await a.close();
      await b.close();
      await database.drop();
    }
  });

  test('two instances, one agent, a burst of overlapping sends: turns start in the order of their place in line', async () => {
    const database = await freshDatabase();
    const a = await startTestApp({ waitCeilingMs: 10_000, instanceId: 'instance-a' }, { database });
    const b = await startTestApp({ waitCeilingMs: 10_000, instanceId: 'instance-b' }, { database });
    try {
      const u = await a.userWithAgent();
      // A job's place is its id, drawn at insert; an older one whose transaction commits late
      // must still not be overtaken by a newer one that found the agent free.
      const sent = await Promise.all(Array.from({ length: 40 }, (_, i) =>
        send(i % 2 ? b : a, u, { text: `burst ${i}`, agent_id: u.agentId }, { Prefer: 'wait=0' })));
      for (const r of sent) assert.equal(r.statusCode, 202, r.body);
      await allIdle(a, u.agentId);
      const jobs = await a.runtime.store.db.selectFrom('jobs').select(['id', 'started_at', 'finished_at']).where('agent_id', '=', u.agentId).orderBy('id').execute();
      assert.equal(jobs.length, 40);
      for (let i = 1; i < jobs.length; i++) {
        assert.ok(startedAfter(jobs[i]!, jobs[i - 1]!, a, b), `job ${jobs[i]!.id} started before job ${jobs[i - 1]!.id} had finished`);
      }
    } finally {
      await a.close();
      await b.close();
      await database.drop();
    }
  });
});
