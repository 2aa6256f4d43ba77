import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { Job } from '../store/schema.ts';
import { openStore, type Store } from '../store/store.ts';
import { seededDatabase, TEST_DB } from '../testing/harness.ts';
import { postMessage, startServerProcess, transcriptFrom, type ServerProcess } from '../testing/server-process.ts';

/**
 * Two real server processes share one PostgreSQL schema. Instance A is killed with SIGKILL
 * while turns are mid-work and never comes back: instance B takes A's turns over once their
 * leases run out, and every message gets exactly one reply in its transcript. A message sent
 * to B while A is dead is answered too.
 *
 * A runs at most two turns at once (RUNNER_CONCURRENCY=2), so that of the four agents' first
 * turns, all sent through A, A holds two and B claims the other two: both instances hold
 * running work when A dies.
 */

const LEASE_MS = 1500;
const A = 'instance-a';
const B = 'instance-b';

describe('SIGKILL one of two instances: the other takes its turns over', { skip: TEST_DB !== 'postgres' && 'PostgreSQL pass only' }, () => {
  const seeded = seededDatabase('instances@example.test', 5, { WAIT_CEILING_MS: '200', JOB_LEASE_MS: String(LEASE_MS), SHUTDOWN_GRACE_MS: '3000' });

  const post = (server: ServerProcess, body: unknown) => postMessage(server, seeded.key, body, { prefer: 'wait=0' });
  const transcriptOf = (server: ServerProcess, sessionId: string) => transcriptFrom(server, seeded.key, sessionId);

  const jobsOf = (store: Store) => store.db.selectFrom('jobs').selectAll().orderBy('id').execute();

  /** Polls the jobs table until `done` holds of it, or fails with what it last saw. */
  async function untilJobs(store: Store, done: (jobs: Job[]) => boolean, what: string, timeoutMs: number): Promise<Job[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const jobs = await jobsOf(store);
      if (done(jobs)) return jobs;
      if (Date.now() > deadline) throw new Error(`${what}: never seen; jobs: ${JSON.stringify(jobs)}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  test('SIGKILL instance A mid-turn: B takes its turns over after their leases expire; each reply lands once', { timeout: 90_000 }, async () => {
    const store = await openStore(seeded.database.url, { pgSchema: seeded.database.pgSchema! });
    const a = await startServerProcess({ ...seeded.env, INSTANCE_ID: A, RUNNER_CONCURRENCY: '2' });
    let b: ServerProcess | undefined;
    /** Every accepted message: its session and the reply it must get. */
    const sent: { sessionId: string; text: string; expected: string }[] = [];
    try {
      b = await startServerProcess({ ...seeded.env, INSTANCE_ID: B });

      // Through A: a long first turn per agent (A claims two at insert, B the other two),
      // then a short second turn in the same session, queued behind it.
      const sessions: string[] = [];
      for (const [i, agentId] of seeded.agentIds.slice(0, 4).entries()) {
        const text = `!sleep 5000 first-${i}`;
        const res = await post(a, { text, agent_id: agentId });
        assert.equal(res.status, 202, JSON.stringify(res.body));
        sessions.push(res.body.session_id);
        sent.push({ sessionId: res.body.session_id, text, expected: `You said: first-${i}` });
      }
      for (const [i, sessionId] of sessions.entries()) {
        const text = `!sleep 300 second-${i}`;
        const res = await post(a, { text, session_id: sessionId });
        assert.equal(res.status, 202, JSON.stringify(res.body));
        assert.equal(res.body.status, 'queued');
        sent.push({ sessionId, text, expected: `You said: second-${i}` });
      }
      const running = (jobs: Job[], owner: string) => jobs.filter((j) => j.status === 'running' && j.lease_owner === owner);
      await untilJobs(store, (jobs) => running(jobs, A).length === 2 && running(jobs, B).length === 2,
        'two turns running on each instance', 4000);
    } catch (error) {
      await a.kill('SIGKILL');
      await b?.kill('SIGKILL');
      await store.close();
      throw error;
    }

    const gone = await a.kill('SIGKILL');
    assert.equal(gone.signal, 'SIGKILL');
    try {
      // Right after the kill (A renewed its leases every LEASE_MS / 3, so they have most of
      // LEASE_MS left): A's turns are still running under its name, mid-work, and no one renews them now.
      const atKill = await jobsOf(store);
      const heldByA = atKill.filter((j) => j.status === 'running' && j.lease_owner === A);
      const heldByB = atKill.filter((j) => j.status === 'running' && j.lease_owner === B);
      assert.equal(heldByA.length, 2, `A's turns mid-work at the kill: ${JSON.stringify(atKill)}`);
      assert.equal(heldByB.length, 2, `B's turns mid-work at the kill: ${JSON.stringify(atKill)}`);
      assert.equal(atKill.filter((j) => j.status === 'queued').length, 4);
      const expiryOfA = new Map(heldByA.map((j) => [Number(j.id), j.lease_expires_at!]));

      // Sent to B while A is dead: one to an agent whose line A held (queued behind A's
      // interrupted turn and that agent's second one), one to an agent with nothing to do.
      const behindA = heldByA[0]!.agent_id;
      for (const [text, agentId] of [['sent while A is dead', behindA], ['sent to a free agent while A is dead', seeded.agentIds[4]!]] as const) {
        const res = await post(b, { text, agent_id: agentId });
        assert.ok(res.status === 202 || (res.status === 200 && res.body.status === 'completed'), JSON.stringify(res.body));
        sent.push({ sessionId: res.body.session_id, text, expected: `You said: ${text}` });
      }

      // Poll: the jobs table (to watch who holds A's turns, and when) and B's transcripts.
      // A poll whose answer came back before a job's lease of A had expired must still show
      // that job held by A: anything else was taken over too early.
      const sessionIds = [...new Set(sent.map((s) => s.sessionId))];
      const seenOwners = new Map<number, Set<string>>([...expiryOfA.keys()].map((id) => [id, new Set([A])]));
      const deadline = Date.now() + 40_000;
      let pages: any[];
      for (;;) {
        const jobs = await jobsOf(store);
        const answeredAt = new Date(store.clock.now()).toISOString(); // the clock leases are written by
        for (const job of jobs) {
          const expiry = expiryOfA.get(Number(job.id));
          if (expiry === undefined) continue;
          if (job.status === 'running') seenOwners.get(Number(job.id))!.add(job.lease_owner!);
          if (answeredAt < expiry) {
            assert.ok(job.status === 'running' && job.lease_owner === A,
              `job ${job.id} left A before its lease expired (${expiry}, seen at ${answeredAt}): ${JSON.stringify(job)}`);
          }
        }
        pages = await Promise.all(sessionIds.map((id) => transcriptOf(b!, id)));
        if (pages.every((p) => p.status === 'idle') && jobs.every((j) => j.status === 'done' || j.status === 'failed')) break;
        if (Date.now() > deadline) {
          throw new Error(`work never finished on B:\njobs: ${JSON.stringify(jobs)}\nstatuses: ${JSON.stringify(pages.map((p) => p.status))}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }

      // Every accepted message: exactly one reply, right after it in its transcript, never an error.
      for (const [i, sessionId] of sessionIds.entries()) {
        const page = pages[i];
        const mine = sent.filter((s) => s.sessionId === sessionId);
        const messages = page.messages as { role: string; text: string; ts: string; error?: string }[];
        assert.equal(page.has_more, false);
        // (A message sent while the one before it ran comes before that one's reply.)
        assert.deepEqual(messages.filter((m) => m.role === 'user').map((m) => m.text), mine.map((s) => s.text), `session ${sessionId}: ${JSON.stringify(messages)}`);
        assert.deepEqual(messages.filter((m) => m.role === 'agent').map((m) => m.text), mine.map((s) => s.expected), `session ${sessionId}: ${JSON.stringify(messages)}`);
        for (const m of messages) assert.equal(m.error, undefined, JSON.stringify(m));
        const users = messages.filter((m) => m.role === 'user');
        for (const [k, reply] of messages.filter((m) => m.role === 'agent').entries()) {
          assert.ok(reply.ts > users[k]!.ts, `session ${sessionId}: reply ${k} comes after its message`);
        }
      }

      // The jobs: all done, each with one reply turn of its own; A's interrupted ones claimed a
      // second time, by B (seen running under B's name), and finished after A's lease ran out.
      const jobs = await jobsOf(store);
      assert.equal(jobs.length, sent.length, 'one job per accepted message');
      for (const job of jobs) assert.equal(job.status, 'done', JSON.stringify(job));
      const replyTurns = await store.db.selectFrom('turns').select(['id', 'job_id']).where('role', '=', 'agent').execute();
      assert.equal(replyTurns.length, sent.length, 'one reply turn per accepted message');
      assert.deepEqual(replyTurns.map((t) => Number(t.job_id)).sort((x, y) => x - y), jobs.map((j) => Number(j.id)).sort((x, y) => x - y),
        'each job wrote exactly one reply');
      assert.deepEqual(new Set(jobs.map((j) => Number(j.reply_turn_id))), new Set(replyTurns.map((t) => Number(t.id))));
      for (const job of jobs) {
        const expiry = expiryOfA.get(Number(job.id));
        if (expiry === undefined) {
          assert.equal(job.attempts, 1, `claimed once: ${JSON.stringify(job)}`);
          continue;
        }
        assert.equal(job.attempts, 2, `claimed by A, then once more: ${JSON.stringify(job)}`);
        assert.deepEqual([...seenOwners.get(Number(job.id))!].sort(), [A, B], `job ${job.id} was held by A, then by B`);
        assert.ok(job.finished_at! > expiry, `job ${job.id} finished (${job.finished_at}) after A's lease expired (${expiry})`);
      }
    } finally {
      await b!.kill('SIGTERM');
      await store.close();
    }
  });
});
