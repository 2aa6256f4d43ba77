import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Job } from '../store/schema.ts';
import { openStore, type Store } from '../store/store.ts';
import { freshDatabase, type TestDatabase } from '../testing/harness.ts';
import { InProcessBus } from './bus.ts';
import { isFinished, TurnEngine, type Finisher, type JobHandler, type RunOutcome, type TurnEngineOptions } from './turn-engine.ts';

/**
 * The scheduling rules, on a real store, through the engine's own API and a handler of the
 * test's: FIFO per agent, one job at a time per agent, agents in parallel, the runner's cap, and
 * a lease taken over. No HTTP and no sleeps: each step waits for the run it expects to start,
 * every job holds until the test lets it finish, and what must not start is checked once the
 * engine has looked at the queue again (lookForWork resolves after a scan). The safety poll is
 * set beyond a test's time, so only the engine's own wake-ups move the work.
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

/** Runs that start as the engine says and end when the test says; what happened, in order, in `timeline`. */
class HeldRuns implements JobHandler {
  /** `start <job>` as a run begins, `end <job>` once its outcome has committed. */
  readonly timeline: string[] = [];
  private readonly starts: number[] = [];
  private startsSeen = 0;
  private startHeard: (() => void) | null = null;
  private readonly releases = new Map<number, PromiseWithResolvers<void>>();

  async run(job: Job, signal: AbortSignal): Promise<Finisher> {
    this.timeline.push(`start ${job.id}`);
    this.starts.push(job.id);
    this.startHeard?.();
    await new Promise<void>((resolve, reject) => {
      void this.releaseOf(job.id).promise.then(resolve);
      signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
    });
    return async (tx) => {
      tx.afterCommit(() => this.timeline.push(`end ${job.id}`));
      return { status: 'done', replyTurnId: null };
    };
  }

  failure(): Finisher {
    return async () => ({ status: 'failed', replyTurnId: null });
  }

  /** The job whose run started next (in the order they started). */
  async nextStart(): Promise<number> {
    while (this.startsSeen === this.starts.length) await new Promise<void>((resolve) => { this.startHeard = resolve; });
    return this.starts[this.startsSeen++]!;
  }

  release(jobId: number): void {
    this.releaseOf(jobId).resolve();
  }

  private releaseOf(jobId: number): PromiseWithResolvers<void> {
    let release = this.releases.get(jobId);
    if (!release) this.releases.set(jobId, (release = Promise.withResolvers<void>()));
    return release;
  }
}

type EngineSettings = Pick<TurnEngineOptions, 'perAgent' | 'concurrency'> & Partial<Pick<TurnEngineOptions, 'leaseMs' | 'store' | 'bus'>>;

let engines = 0;
function engineWith(handler: HeldRuns, settings: EngineSettings): TurnEngine {
  const engine = new TurnEngine({ store, bus: new InProcessBus(), instanceId: `scheduling-${++engines}`, leaseMs: 15_000, pollMs: 600_000, ...settings });
  engine.setHandler(handler);
  return engine;
}

/** Enqueues one job for `agentId` in a transaction of its own: the job as inserted (claimed at once, or queued). */
function enqueue(engine: TurnEngine, agentId: string): Promise<Job> {
  return engine.transact((tx) => engine.enqueue(tx, {
    agentId, sessionId: `ses_${agentId}`, userId: 'usr_scheduling', kind: 'message', payload: { kind: 'message', text: agentId },
  }));
}

/** Lets every run finish (releasing what `release` names), then stops the engine. */
async function finishAndStop(engine: TurnEngine, held: HeldRuns, jobIds: number[]): Promise<void> {
  for (const id of jobIds) held.release(id);
  await Promise.all(jobIds.map((id) => engine.waitForJob(id, 5_000)));
  await engine.stop(1_000);
}

const steps = { timeout: 15_000 };

test('a job is claimed as it is enqueued when its agent\'s line is free, and queued behind its agent\'s running job', steps, async () => {
  const held = new HeldRuns();
  const engine = engineWith(held, { perAgent: 1, concurrency: 4 });
  await engine.start();
  const first = await enqueue(engine, 'agt_insert_a');
  const second = await enqueue(engine, 'agt_insert_a');
  const otherAgent = await enqueue(engine, 'agt_insert_b');
  try {
    assert.deepEqual([first.status, second.status, otherAgent.status], ['running', 'queued', 'running']);
    assert.deepEqual(new Set([await held.nextStart(), await held.nextStart()]), new Set([first.id, otherAgent.id]));
  } finally {
    await finishAndStop(engine, held, [first.id, second.id, otherAgent.id]);
  }
});

test('one agent\'s jobs run one at a time, in the order they were enqueued', steps, async () => {
  const held = new HeldRuns();
  const engine = engineWith(held, { perAgent: 1, concurrency: 4 });
  await engine.start();
  const ids: number[] = [];
  for (let i = 0; i < 5; i++) ids.push((await enqueue(engine, 'agt_fifo')).id);
  try {
    for (const id of ids) {
      assert.equal(await held.nextStart(), id, 'the oldest job of the line starts next');
      await engine.lookForWork();
      assert.equal(held.timeline.at(-1), `start ${id}`, 'nothing else of the line started while it runs');
      held.release(id);
    }
    await Promise.all(ids.map((id) => engine.waitForJob(id, 5_000)));
    assert.deepEqual(held.timeline, ids.flatMap((id) => [`start ${id}`, `end ${id}`]), 'each started once the one before it had ended');
  } finally {
    await finishAndStop(engine, held, ids);
  }
});

test('a scan of the queue starts the head of each agent\'s line, never the jobs behind it', steps, async () => {
  // Enqueued before the runner starts, so its first scan finds them all queued. That scan claims
  // in id order: had it taken a job from behind a busy line, it would have done so before
  // reaching the other agent's job, whose start is awaited here.
  const held = new HeldRuns();
  const engine = engineWith(held, { perAgent: 1, concurrency: 8 });
  const line = [];
  for (let i = 0; i < 3; i++) line.push((await enqueue(engine, 'agt_scan_a')).id);
  const other = (await enqueue(engine, 'agt_scan_b')).id;
  await engine.start();
  try {
    assert.deepEqual([await held.nextStart(), await held.nextStart()], [line[0], other]);
    await engine.lookForWork();
    assert.equal(held.timeline.length, 2, 'the jobs behind the head wait');
    held.release(line[0]!);
    assert.equal(await held.nextStart(), line[1], 'the next in line, once the head has ended');
    assert.ok(held.timeline.indexOf(`end ${line[0]}`) < held.timeline.indexOf(`start ${line[1]}`));
  } finally {
    await finishAndStop(engine, held, [...line, other]);
  }
});

test('different agents\' jobs run at the same time', steps, async () => {
  const held = new HeldRuns();
  const engine = engineWith(held, { perAgent: 1, concurrency: 4 });
  await engine.start();
  const ids = [];
  for (const agentId of ['agt_parallel_a', 'agt_parallel_b', 'agt_parallel_c']) ids.push((await enqueue(engine, agentId)).id);
  try {
    // None has been let finish: all three run at once.
    assert.deepEqual(new Set([await held.nextStart(), await held.nextStart(), await held.nextStart()]), new Set(ids));
    assert.equal(engine.running, 3);
  } finally {
    await finishAndStop(engine, held, ids);
  }
});

test('an agent allowed two at once runs two, and the third waits for one of them', steps, async () => {
  const held = new HeldRuns();
  const engine = engineWith(held, { perAgent: 2, concurrency: 4 });
  await engine.start();
  const ids: number[] = [];
  for (let i = 0; i < 3; i++) ids.push((await enqueue(engine, 'agt_two_at_once')).id);
  try {
    assert.deepEqual([await held.nextStart(), await held.nextStart()], ids.slice(0, 2));
    await engine.lookForWork();
    assert.equal(held.timeline.length, 2, 'the third waits');
    held.release(ids[1]!);
    assert.equal(await held.nextStart(), ids[2]);
    assert.ok(held.timeline.indexOf(`end ${ids[1]}`) < held.timeline.indexOf(`start ${ids[2]}`), 'the third started once a slot of its agent was free');
  } finally {
    await finishAndStop(engine, held, ids);
  }
});

test('a runner runs no more jobs at once than its concurrency: another agent\'s job waits for a free slot', steps, async () => {
  const held = new HeldRuns();
  const engine = engineWith(held, { perAgent: 1, concurrency: 2 });
  const ids = [];
  for (const agentId of ['agt_cap_a', 'agt_cap_b', 'agt_cap_c']) ids.push((await enqueue(engine, agentId)).id);
  await engine.start();
  try {
    assert.deepEqual([await held.nextStart(), await held.nextStart()], ids.slice(0, 2));
    await engine.lookForWork();
    assert.equal(engine.running, 2);
    assert.equal(held.timeline.length, 2, 'the third waits, though its agent is free');
    held.release(ids[0]!);
    assert.equal(await held.nextStart(), ids[2]);
    assert.ok(held.timeline.indexOf(`end ${ids[0]}`) < held.timeline.indexOf(`start ${ids[2]}`), 'the third started once a slot was free');
  } finally {
    await finishAndStop(engine, held, ids);
  }
});

test('a job whose lease expired is taken over by another runner, and the first runner\'s late outcome is not written', steps, async () => {
  // One clock for both runners, moved past the first runner's lease: to the second, whose
  // sweep for expired leases runs every 200 ms, the first has stopped renewing it (it died).
  const clock = { aheadMs: 0, now: () => Date.now() + clock.aheadMs };
  const shared = { store: { ...store, clock }, bus: new InProcessBus() };
  const heldByFirst = new HeldRuns();
  const heldBySecond = new HeldRuns();
  const first = engineWith(heldByFirst, { perAgent: 1, concurrency: 1, leaseMs: 60_000, ...shared });
  const second = engineWith(heldBySecond, { perAgent: 1, concurrency: 1, leaseMs: 400, ...shared });
  const firstOutcome = Promise.withResolvers<RunOutcome>();
  first.observe({ started() {}, ended: (run) => firstOutcome.resolve(run.outcome) });
  await first.start();
  await second.start(); // before the job exists: its start puts nothing of the first's back in line
  const job = await enqueue(first, 'agt_lease');
  try {
    assert.equal(job.status, 'running');
    assert.equal(await heldByFirst.nextStart(), job.id);
    clock.aheadMs = 61_000;
    assert.equal(await heldBySecond.nextStart(), job.id, 'the second runner took the job over');
    heldByFirst.release(job.id);
    assert.equal(await firstOutcome.promise, 'requeued', 'the first runner\'s outcome was refused: the lease is no longer its own');
    heldBySecond.release(job.id);
    const state = await second.waitForJob(job.id, 5_000);
    assert.ok(isFinished(state.job));
    const row = await store.db.selectFrom('jobs').select(['status', 'attempts', 'lease_owner']).where('id', '=', job.id).executeTakeFirstOrThrow();
    assert.deepEqual({ ...row }, { status: 'done', attempts: 2, lease_owner: null });
    assert.deepEqual(heldByFirst.timeline, [`start ${job.id}`], 'nothing of the first run was committed');
    assert.deepEqual(heldBySecond.timeline, [`start ${job.id}`, `end ${job.id}`]);
  } finally {
    heldByFirst.release(job.id);
    heldBySecond.release(job.id);
    await first.stop(1_000);
    await second.stop(1_000);
  }
});
