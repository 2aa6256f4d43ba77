import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openStore, type Store } from '../store/store.ts';
import { freshDatabase, type TestDatabase } from '../testing/harness.ts';
import { InProcessBus } from './bus.ts';
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

async function runAll(engine: TurnEngine, jobs: Array<{ agentId: string }>): Promise<void> {
  const ids: number[] = [];
  for (const [i, job] of jobs.entries()) {
    ids.push(await engine.transact(async (trx, stage, hooks) => (await engine.enqueue(trx, stage, hooks, {
      agentId: job.agentId, sessionId: `ses_wakeups${i}`, userId: 'usr_wakeups', kind: 'message', payload: { kind: 'message', text: `${i}` },
    })).id));
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
