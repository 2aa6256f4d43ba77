import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql, type KyselyPlugin } from 'kysely';
import { openStore, type Store } from '../store/store.ts';
import { randomBase62 } from '../domain/ids.ts';
import { API, freshDatabase, startTestApp, TEST_DB, type TestDatabase } from '../testing/harness.ts';
import { channelOf, InProcessBus, PostgresBus } from './bus.ts';
import { isFinished, TurnEngine, type JobHandler } from './turn-engine.ts';

/**
 * Queued work starts the moment a slot or its agent's line frees, by wake-up alone: the safety
 * poll is set to ten minutes here, so a missed wake-up would time the test out.
 */
let database: TestDatabase;
let store: Store;
before(async () => {
  database = await freshDatabase();
  store = await openStore(database.url, database.pgSchema ? { pgSchema: database.pgSchema } : {});
});
after(async () => {
  await store.close();
  await database.drop();
});

const slowHandler: JobHandler = {
  async run() {
    await new Promise((resolve) => setTimeout(resolve, 30));
    return async () => ({ status: 'done', replyTurnId: null });
  },
  failure: () => async () => ({ status: 'failed', replyTurnId: null }),
};

/** A handler whose jobs hold until `release()` is called. */
function heldHandler(): { handler: JobHandler; release: () => void } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  return { handler: { async run() { await released; return async () => ({ status: 'done', replyTurnId: null }); }, failure: slowHandler.failure }, release };
}

/** Enqueues one message job through `engine` and returns its id. */
function enqueueOne(engine: TurnEngine, agentId: string, sessionId: string, text: string): Promise<number> {
  return engine.transact(async (tx) => (await engine.enqueue(tx, {
    agentId, sessionId, userId: 'usr_wakeups', kind: 'message', payload: { kind: 'message', text },
  })).id);
}

/** The wake-up (LISTEN) connections of this file's schema: how many, and dropping them all as a database restart would. */
const wakeUpQuery = () => `LISTEN "${channelOf(database.pgSchema ?? null)}"`;
const wakeUpConnections = async () => (await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where query = ${wakeUpQuery()}`
  .execute(store.db)).rows[0]!.n;
const cutWakeUpConnections = () => sql`select pg_terminate_backend(pid) from pg_stat_activity where query = ${wakeUpQuery()}`.execute(store.db);

/** Waits (5 s at most) until `owner` holds the job's lease. */
async function claimedBy(jobId: number, owner: string): Promise<void> {
  for (const deadline = Date.now() + 5_000; ;) {
    const job = await store.db.selectFrom('jobs').select('lease_owner').where('id', '=', jobId).executeTakeFirst();
    if (job?.lease_owner === owner) return;
    assert.ok(Date.now() < deadline, `${owner} claims the job`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function runAll(engine: TurnEngine, jobs: Array<{ agentId: string }>): Promise<void> {
  const ids: number[] = [];
  for (const [i, job] of jobs.entries()) {
    ids.push(await enqueueOne(engine, job.agentId, `ses_wakeups${i}`, `${i}`));
  }
  const states = await Promise.all(ids.map((id) => engine.waitForJob(id, 5_000)));
  assert.ok(states.every((state) => isFinished(state.job)), 'every job finished without the poll');
}

/** A runner whose safety poll never comes within a test's time. */
async function withEngine(instanceId: string, concurrency: number, body: (engine: TurnEngine) => Promise<void>): Promise<void> {
  const engine = new TurnEngine({ store, bus: new InProcessBus(), instanceId, perAgent: 1, concurrency, leaseMs: 15_000, pollMs: 600_000 });
  engine.setHandler(slowHandler);
  await engine.start();
  try {
    await body(engine);
  } finally {
    await engine.stop(1_000);
  }
}

test('a job queued behind its busy agent starts when the agent\'s line frees', async () => {
  await withEngine('wakeups-a', 8, (engine) => runAll(engine, [{ agentId: 'agt_line' }, { agentId: 'agt_line' }, { agentId: 'agt_line' }]));
});

test('a job queued for want of a free slot starts when another agent\'s job ends', async () => {
  await withEngine('wakeups-b', 1, async (engine) => {
    await runAll(engine, [{ agentId: 'agt_one' }, { agentId: 'agt_two' }, { agentId: 'agt_three' }]);
    // And again, after the queue was seen empty: new work still wakes it.
    await runAll(engine, [{ agentId: 'agt_one' }, { agentId: 'agt_two' }]);
  });
});

test('a job that ends while a scan of the queue is under way still frees its agent\'s line', async () => {
  // The scan's result is held back (through Kysely's plugin hook) until the job blocking the
  // line has ended, so its end lands while the scan is under way, having read the queue before.
  let whileScanning: (() => Promise<void>) | null = null;
  const scans = new Set<unknown>();
  const holdScan: KyselyPlugin = {
    transformQuery({ node, queryId }) {
      if (node.kind === 'RawNode' && /with recursive heads|as startable/.test(JSON.stringify(node))) scans.add(queryId); // findClaimable's two
      return node;
    },
    async transformResult({ result, queryId }) {
      const hold = whileScanning;
      if (hold && scans.has(queryId)) {
        whileScanning = null;
        await hold();
      }
      return result;
    },
  };
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  let firstRun = true;
  const engine = new TurnEngine({
    store: { ...store, db: store.db.withPlugin(holdScan) }, bus: new InProcessBus(), instanceId: 'wakeups-c',
    perAgent: 1, concurrency: 8, leaseMs: 15_000, pollMs: 600_000,
  });
  engine.setHandler({
    async run() {
      if (firstRun) {
        firstRun = false;
        await released; // the first job holds the agent's line until the scan is under way
      }
      return async () => ({ status: 'done', replyTurnId: null });
    },
    failure: () => async () => ({ status: 'failed', replyTurnId: null }),
  });
  await engine.start();
  try {
    const enqueue = (i: number) => enqueueOne(engine, 'agt_scan', `ses_scan${i}`, `${i}`);
    const blocking = await enqueue(1);
    const waiting = await enqueue(2);
    await new Promise((resolve) => setTimeout(resolve, 100)); // the scan for the queued job has come and gone
    whileScanning = async () => {
      release();
      await engine.waitForJob(blocking, 2_000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    };
    void engine.lookForWork(); // any sign of new work (another agent's message, the poll) starts a scan
    assert.ok(isFinished((await engine.waitForJob(blocking, 2_000)).job));
    const state = await engine.waitForJob(waiting, 2_000);
    assert.ok(isFinished(state.job), `the waiting job is still ${state.job.status} 2 s after the line freed`);
  } finally {
    await engine.stop(1_000);
  }
});

test('a waiter on an instance that does not run its job is woken by the job\'s end on another, not at its timeout', { timeout: 20_000 }, async () => {
  // Two instances on one bus: A only waits (no runner), B runs the job.
  const bus = new InProcessBus();
  const a = new TurnEngine({ store, bus, instanceId: 'wakeups-elsewhere-a', perAgent: 1, concurrency: 1, leaseMs: 15_000, pollMs: 600_000 });
  const b = new TurnEngine({ store, bus, instanceId: 'wakeups-elsewhere-b', perAgent: 1, concurrency: 8, leaseMs: 15_000, pollMs: 600_000 });
  const { handler: heldOnB, release } = heldHandler();
  b.setHandler(heldOnB);
  await a.start();
  await b.start();
  try {
    const jobId = await enqueueOne(a, 'agt_elsewhere', 'ses_elsewhere', 'elsewhere');
    const waiting = a.waitForJob(jobId, 30_000); // a missed wake-up would time the test (20 s) out
    await claimedBy(jobId, 'wakeups-elsewhere-b');
    release();
    const state = await waiting;
    assert.ok(isFinished(state.job), `the job is ${state.job.status}`);
  } finally {
    release();
    await a.stop(1_000);
    await b.stop(1_000);
    bus.close();
  }
});

test('work whose runner died is announced when its lease is swept, so a runner on another instance takes it up', { skip: TEST_DB !== 'postgres' }, async () => {
  // Instance A sweeps expired leases but is full (one slot, busy); instance B is idle and has
  // seen an empty queue, so only the announcement can bring the orphaned job to it.
  const { handler: heldOnA, release: releaseA } = heldHandler();
  const buses = [await PostgresBus.connect(database.url, database.pgSchema ?? null), await PostgresBus.connect(database.url, database.pgSchema ?? null)];
  const a = new TurnEngine({ store, bus: buses[0]!, instanceId: 'wakeups-swept-a', perAgent: 1, concurrency: 1, leaseMs: 600, pollMs: 600_000 });
  const b = new TurnEngine({ store, bus: buses[1]!, instanceId: 'wakeups-swept-b', perAgent: 1, concurrency: 8, leaseMs: 15_000, pollMs: 600_000 });
  a.setHandler(heldOnA);
  b.setHandler(slowHandler);
  await a.start();
  await b.start();
  try {
    const busy = await enqueueOne(a, 'agt_busy', 'ses_busy', 'busy');
    // A job a dead instance was running: its lease ran out a moment ago.
    const [orphan] = await store.db.insertInto('jobs').values({
      agent_id: 'agt_orphan', session_id: 'ses_orphan', user_id: 'usr_wakeups', kind: 'message', payload: JSON.stringify({ kind: 'message', text: 'orphan' }),
      status: 'running', attempts: 1, lease_owner: 'gone', lease_expires_at: new Date(Date.now() - 1).toISOString(),
      created_at: new Date().toISOString(), started_at: new Date().toISOString(),
    }).returning('id').execute();
    const state = await b.waitForJob(Number(orphan!.id), 3_000);
    assert.ok(isFinished(state.job), `the orphaned job is still ${state.job.status}`);
    releaseA();
    await a.waitForJob(busy, 3_000);
  } finally {
    releaseA();
    await a.stop(1_000);
    await b.stop(1_000);
    for (const bus of buses) await bus.close();
  }
});

test('a schema name of 63 characters, the longest PostgreSQL takes, still carries wake-ups: a turn completes', { skip: TEST_DB !== 'postgres' }, async () => {
  const longSchema = `t_${randomBase62(12).toLowerCase()}_${'x'.repeat(48)}`;
  assert.equal(longSchema.length, 63);
  const t = await startTestApp({}, { database: await freshDatabase(longSchema) });
  try {
    const user = await t.userWithAgent();
    const res = await t.inject({ method: 'POST', url: `${API}/messages`, headers: user.auth, payload: { text: 'hello', agent_id: user.agentId } });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().reply, 'You said: hello');
  } finally {
    await t.close();
    await t.database.drop();
  }
});

test('the wake-up channel of a schema fits PostgreSQL\'s 63 bytes, and two long schema names get two channels', () => {
  const prefix = 'x'.repeat(49);
  for (const schema of [null, 'public', 'a'.repeat(49), 'a'.repeat(63)]) assert.ok(channelOf(schema).length <= 63, String(schema));
  assert.equal(channelOf('t_short'), 'agent_channel_t_short', 'a name that fits is kept as it is (rolling deploys keep one channel)');
  assert.notEqual(channelOf(`${prefix}_one`), channelOf(`${prefix}_two`));
});

test('a waiter whose job ended elsewhere while its bus was reconnecting is woken once the bus is back, not at its timeout', { skip: TEST_DB !== 'postgres', timeout: 20_000 }, async () => {
  // A only waits (no runner); B runs the job. A's wake-up connection is cut just before the job
  // ends, so the announcement of its end reaches nobody on A.
  let a!: TurnEngine;
  const busA = await PostgresBus.connect(database.url, database.pgSchema ?? null, () => void a.caughtUp());
  const busB = await PostgresBus.connect(database.url, database.pgSchema ?? null);
  a = new TurnEngine({ store, bus: busA, instanceId: 'wakeups-gap-a', perAgent: 1, concurrency: 1, leaseMs: 15_000, pollMs: 600_000 });
  const b = new TurnEngine({ store, bus: busB, instanceId: 'wakeups-gap-b', perAgent: 1, concurrency: 8, leaseMs: 15_000, pollMs: 600_000 });
  const { handler: heldOnB, release } = heldHandler();
  b.setHandler(heldOnB);
  await a.start();
  await b.start();
  try {
    const jobId = await enqueueOne(a, 'agt_gap', 'ses_gap', 'gap');
    const waiting = a.waitForJob(jobId, 600_000); // a missed wake-up would time the test out
    await claimedBy(jobId, 'wakeups-gap-b');
    // Cut every wake-up connection of this schema (both reconnect after 200 ms), then end the job.
    await cutWakeUpConnections();
    release();
    const state = await waiting;
    assert.ok(isFinished(state.job), `the job is ${state.job.status}`);
  } finally {
    release();
    await a.stop(1_000);
    await b.stop(1_000);
    await busA.close();
    await busB.close();
  }
});

test('a bus closed while it reconnects leaves no connection behind', { skip: TEST_DB !== 'postgres', timeout: 60_000 }, async () => {
  for (let delayMs = 195; delayMs <= 225; delayMs += 3) { // around the reconnection, 200 ms after the drop
    const bus = await PostgresBus.connect(database.url, database.pgSchema ?? null);
    await cutWakeUpConnections();
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    await bus.close();
    // A connection under way when the bus closed ends once it lands: how soon depends on the
    // machine's load, so the count is read until it is 0 (a connection left behind stays).
    let left = await wakeUpConnections();
    for (const deadline = Date.now() + 5_000; left > 0 && Date.now() < deadline; left = await wakeUpConnections()) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(left, 0, `closed ${delayMs} ms after the drop`);
  }
});

test('an event a transaction stages twice is delivered once', async () => {
  const bus = new InProcessBus();
  const engine = new TurnEngine({ store, bus, instanceId: 'events-once', perAgent: 1, concurrency: 1, leaseMs: 15_000, pollMs: 600_000 });
  const heard: unknown[] = [];
  const stopListening = bus.on((event) => heard.push(event));
  try {
    await engine.transact(async (tx) => {
      await tx.publish({ type: 'job_enqueued', agentId: 'agt_a' });
      await tx.publish({ type: 'job_enqueued', agentId: 'agt_a' });
      await tx.publish({ type: 'job_enqueued', agentId: 'agt_b' });
    });
    assert.deepEqual(heard, [{ type: 'job_enqueued', agentId: 'agt_a' }, { type: 'job_enqueued', agentId: 'agt_b' }]);
  } finally {
    stopListening();
    await bus.close();
  }
});
