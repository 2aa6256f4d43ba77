import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { pollTranscript, send } from '../testing/conversation.ts';
import { API, freshDatabase, startTestApp, TEST_DB, TEST_PG_URL, type TestApp, withTestApp } from '../testing/harness.ts';
import { type FreezableProxy, proxyInFrontOf } from '../testing/frozen-database.ts';
import { signedUpWithAgent } from '../testing/web-client.ts';

/**
 * The database away for a while (restarting, unreachable, locked by another process, its disk
 * full): a turn is neither lost, nor failed, nor run twice for it, and nobody is told "500".
 */

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function jobOf(t: TestApp, sessionId: string) {
  return t.runtime.store.db.selectFrom('jobs').select(['id', 'status', 'attempts', 'lease_owner'])
    .where('session_id', '=', sessionId).executeTakeFirstOrThrow();
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await pause(25);
  }
}

/** A test app on a fresh PostgreSQL schema reached through a proxy of the test's, to take the database away. */
async function behindAProxy(use: (t: TestApp, proxy: FreezableProxy) => Promise<void>, config: Partial<TestApp['config']>): Promise<void> {
  const { proxy, url } = await proxyInFrontOf(TEST_PG_URL);
  const database = await freshDatabase();
  try {
    await withTestApp((t) => use(t, proxy), { ...config, databaseUrl: url }, { database });
  } finally {
    await proxy.close();
    await database.drop();
  }
}

test('PostgreSQL away for two seconds: the waiting request is answered 202, other requests 503 with Retry-After, and the turn that ended meanwhile is written once when it is back', { skip: TEST_DB !== 'postgres', timeout: 60_000 }, async () => {
  await behindAProxy(async (t, proxy) => {
    const u = await t.userWithAgent();
    const { web } = await signedUpWithAgent(t);
    // The turn sleeps 1.5 s; its request waits 1 s; the database goes at 0.4 s, back at 2.5 s.
    const sending = send(t, u, { text: '!sleep 1500' }, { Prefer: 'wait=1' });
    await pause(400);
    proxy.cut();
    const during = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
    const page = await web.get('/agents');
    const answer = await sending;
    await pause(2100); // the database is back 2.5 s in
    proxy.restore();

    assert.equal(during.statusCode, 503, during.body);
    assert.equal(during.json().code, 'service_unavailable');
    assert.equal(during.headers['retry-after'], '1');
    assert.equal(page.statusCode, 503, 'a web page says so too');
    assert.match(page.body, /cannot reach its database/);
    assert.equal(answer.statusCode, 202, answer.body);
    const sessionId = answer.json().session_id;
    const transcript = await pollTranscript(t, u, sessionId, (b) => b.messages.length >= 2, 15_000);
    assert.deepEqual(transcript.messages.map((m: { role: string; text: string; error?: string }) => [m.role, m.text, m.error]),
      [['user', '!sleep 1500', undefined], ['agent', 'Slept 1500 ms.', undefined]]);
    const job = await jobOf(t, sessionId);
    assert.deepEqual([job.status, job.attempts], ['done', 1], 'written by its runner, not run again');
  }, { waitCeilingMs: 5000 });
});

test('PostgreSQL away while a turn is still at work (its own reads fail): the turn is not failed for it, it runs again once the database is back', { skip: TEST_DB !== 'postgres', timeout: 60_000 }, async () => {
  await behindAProxy(async (t, proxy) => {
    const u = await t.userWithAgent();
    // After its sleep the built-in agent looks the person up (a read): the database is gone by then.
    const res = await send(t, u, { text: `!sleep 800 !ask-user ${u.email} text What now?` }, { Prefer: 'wait=0' });
    const sessionId = res.json().session_id;
    await pause(300);
    proxy.cut();
    await pause(2500);
    proxy.restore();
    const page = await pollTranscript(t, u, sessionId, (b) => b.messages.length >= 2, 20_000);
    assert.equal(page.messages[1].error, undefined, JSON.stringify(page.messages[1]));
    assert.match(page.messages[1].text, /What now\?/);
    const job = await jobOf(t, sessionId);
    assert.equal(job.status, 'done');
  }, { waitCeilingMs: 5000, leaseMs: 1000 });
});

test('SQLite locked by another process past the busy timeout as a turn ends: its outcome is written once the lock is gone, not recorded as a failure', { skip: TEST_DB !== 'sqlite', timeout: 60_000 }, async () => {
  await withTestApp(async (t) => {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: '!sleep 300' }, { Prefer: 'wait=0' });
    const sessionId = res.json().session_id;
    await until(() => jobOf(t, sessionId), (job) => job.status === 'running', 'the job to run');
    // Another process's long write transaction (a CLI, a backup tool): the server's writes wait
    // for SQLite's busy timeout (5 s) and then fail.
    const other = new DatabaseSync(t.config.databaseUrl.slice('sqlite:'.length));
    other.exec('BEGIN IMMEDIATE');
    const release = setTimeout(() => other.exec('COMMIT'), 1000);
    try {
      const page = await pollTranscript(t, u, sessionId, (b) => b.messages.length >= 2, 30_000);
      assert.deepEqual(page.messages.map((m: { text: string; error?: string }) => [m.text, m.error]),
        [['!sleep 300', undefined], ['Slept 300 ms.', undefined]]);
      const job = await jobOf(t, sessionId);
      assert.deepEqual([job.status, job.attempts], ['done', 1]);
    } finally {
      clearTimeout(release);
      if (other.isTransaction) other.exec('COMMIT');
      other.close();
    }
  }, { waitCeilingMs: 5000 });
});

test('a job whose lease another runner took over is stopped here at the next heartbeat: its slot frees, and it writes nothing', { timeout: 30_000 }, async () => {
  await withTestApp(async (t) => {
    const u = await t.userWithAgent({ plan: 'pro' });
    const other = await t.runtime.services.agents.create(u.id, { agent_name: 'Other' });
    const res = await send(t, u, { text: '!sleep 3000', agent_id: u.agentId }, { Prefer: 'wait=0' });
    const sessionId = res.json().session_id;
    const running = await until(() => jobOf(t, sessionId), (job) => job.status === 'running', 'the job to run');
    // What the store looks like after another instance took the job over (its lease had run out).
    await t.runtime.store.db.updateTable('jobs').set({ lease_owner: 'another-instance', lease_expires_at: new Date(Date.now() + 3_600_000).toISOString() })
      .where('id', '=', running.id).execute();
    await pause(700); // two heartbeats
    // The one runner slot is free again: another agent's turn runs at once.
    const next = await send(t, u, { text: 'my turn', agent_id: other.agent_id }, { Prefer: 'wait=2' });
    assert.equal(next.json().status, 'completed', next.body);
    await pause(3000); // past the end of the sleep
    const job = await jobOf(t, sessionId);
    assert.deepEqual([job.status, job.lease_owner], ['running', 'another-instance'], 'left to its new runner');
    const page = await pollTranscript(t, u, sessionId, () => true);
    assert.equal(page.messages.length, 1, 'no reply written by the runner that lost the job');
  }, { leaseMs: 1000, runnerConcurrency: 1, waitCeilingMs: 5000 });
});

test('a run that ends after its lease was taken over, before its heartbeat could notice, writes nothing', { timeout: 30_000 }, async () => {
  await withTestApp(async (t) => {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: '!sleep 800' }, { Prefer: 'wait=0' });
    const sessionId = res.json().session_id;
    const running = await until(() => jobOf(t, sessionId), (job) => job.status === 'running', 'the job to run');
    // Another instance took the job over; this one's next heartbeat is 20 s away (a lease of a
    // minute), long after the run ends: only the lease check of the finishing write stops it.
    await t.runtime.store.db.updateTable('jobs').set({ lease_owner: 'another-instance', lease_expires_at: new Date(Date.now() + 3_600_000).toISOString() })
      .where('id', '=', running.id).execute();
    await until(async () => t.runtime.engine.running, (n) => n === 0, 'the run here to end');
    const job = await jobOf(t, sessionId);
    assert.deepEqual([job.status, job.lease_owner], ['running', 'another-instance'], 'left to its new runner');
    const page = await pollTranscript(t, u, sessionId, () => true);
    assert.equal(page.messages.length, 1, 'no reply written by the runner that lost the job');
  }, { leaseMs: 60_000, waitCeilingMs: 5000 });
});

test('an orderly shutdown gives the turn\'s attempt back: six in a row mid-turn do not end it failed', { timeout: 60_000 }, async () => {
  let t = await startTestApp({ waitCeilingMs: 5000 });
  try {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: '!sleep 600000' }, { Prefer: 'wait=0' });
    const sessionId = res.json().session_id;
    for (let i = 0; i < 6; i++) {
      await until(() => jobOf(t, sessionId), (job) => job.status === 'running', 'the job to run again');
      t = await t.restart(); // closes with no grace: the running turn is given back
    }
    const job = await until(() => jobOf(t, sessionId), (j) => j.status === 'running', 'the job to run again');
    assert.equal(job.attempts, 1, 'only the attempt under way counts');
  } finally {
    await t.close();
  }
});

test('a job put back in line elsewhere while it still runs here is not claimed a second time here until that run has let go of it', { timeout: 30_000 }, async () => {
  await withTestApp(async (t) => {
    const u = await t.userWithAgent();
    const res = await send(t, u, { text: '!sleep 1000' }, { Prefer: 'wait=0' });
    const sessionId = res.json().session_id;
    const running = await until(() => jobOf(t, sessionId), (job) => job.status === 'running', 'the job to run');
    // What another instance's sweep does to a lease it finds expired (this one's heartbeat had
    // not reached the store in time), and the wake-up it sends.
    await t.runtime.store.db.updateTable('jobs').set({ status: 'queued', lease_owner: null, lease_expires_at: null })
      .where('id', '=', running.id).execute();
    void t.runtime.engine.lookForWork();
    await pause(300);
    assert.deepEqual(await jobOf(t, sessionId).then((job) => [job.status, job.attempts]), ['queued', 1], 'not claimed again while its run goes on here');
    // Once that run ends (its outcome refused: the job is no longer its own), it runs afresh, once.
    const page = await pollTranscript(t, u, sessionId, (b) => b.messages.length >= 2, 15_000);
    assert.deepEqual(page.messages.map((m: { text: string }) => m.text), ['!sleep 1000', 'Slept 1000 ms.']);
    assert.deepEqual(await jobOf(t, sessionId).then((job) => [job.status, job.attempts]), ['done', 2]);
  }, { leaseMs: 60_000, waitCeilingMs: 5000 });
});
