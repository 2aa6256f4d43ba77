import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { openStore, type Store } from '../store/store.ts';
import { freshDatabase, TEST_DB, type TestDatabase } from '../testing/harness.ts';
import { InProcessBus, type BusEvent } from './bus.ts';
import { TurnEngine } from './turn-engine.ts';

/**
 * Transactions grouped into one (SQLite): units run together with no savepoint each, and when
 * one fails, the rest run again apart, so that no unit ever sees another's failure. On
 * PostgreSQL each transaction runs alone; the outcomes asked of it are the same.
 */
let database: TestDatabase;
let store: Store;
before(async () => {
  database = await freshDatabase();
  store = await openStore(database.url, database.pgSchema ? { pgSchema: database.pgSchema } : {});
  await sql`create table batch_probe (n integer primary key)`.execute(store.db);
});
after(async () => {
  await store.close();
  await database.drop();
});

const sqliteOnly = { skip: TEST_DB !== 'sqlite' && 'SQLite groups transactions; PostgreSQL runs each alone' };

class UnitFailed extends Error {}

/** Per unit: how often its work ran, its hooks fired, and how its caller's promise settled. */
interface Trace { runs: number; committed: number; rolledBack: number; outcome: 'resolved' | 'rejected' | null; error?: unknown }

/**
 * Sends units at once (so that they share a batch): unit n inserts row n and stages an event,
 * and a unit listed in `failing` throws after its insert.
 */
async function sendTogether(engine: TurnEngine, numbers: number[], failing: number[] = []): Promise<Map<number, Trace>> {
  const traces = new Map<number, Trace>();
  const settled = numbers.map((n) => {
    const trace: Trace = { runs: 0, committed: 0, rolledBack: 0, outcome: null };
    traces.set(n, trace);
    return engine.transact(async (trx, stage, hooks) => {
      trace.runs++;
      hooks.afterCommit(() => trace.committed++);
      hooks.onRollback(() => trace.rolledBack++);
      await sql`insert into batch_probe (n) values (${n})`.execute(trx);
      await stage({ type: 'job_enqueued', agentId: `agt_probe${n}` });
      if (failing.includes(n)) throw new UnitFailed(`unit ${n}`);
      return n;
    }).then((value) => {
      assert.equal(value, n);
      trace.outcome = 'resolved';
    }, (error: unknown) => {
      trace.outcome = 'rejected';
      trace.error = error;
    });
  });
  await Promise.all(settled);
  return traces;
}

async function rowsIn(from: number, to: number): Promise<number[]> {
  const rows = await sql<{ n: number }>`select n from batch_probe where n >= ${from} and n < ${to} order by n`.execute(store.db);
  return rows.rows.map((row) => Number(row.n));
}

function newEngine(bus = new InProcessBus()): TurnEngine {
  return new TurnEngine({ store, bus, instanceId: 'batches', perAgent: 1, concurrency: 1, leaseMs: 15_000, pollMs: 600_000 });
}

test('units sent at once each run once and all commit, in one transaction on SQLite', async () => {
  const engine = newEngine();
  const traces = await sendTogether(engine, [100, 101, 102, 103, 104]);
  assert.deepEqual(await rowsIn(100, 200), [100, 101, 102, 103, 104]);
  for (const trace of traces.values()) assert.deepEqual(trace, { runs: 1, committed: 1, rolledBack: 0, outcome: 'resolved' });
  if (TEST_DB === 'sqlite') assert.deepEqual(engine.batchStats, { batches: 1, replays: 0 });
});

test('a failing unit among others fails alone: its writes, events and hooks roll back, the others commit once', async () => {
  const bus = new InProcessBus();
  const heard: BusEvent[] = [];
  const stopListening = bus.on((event) => heard.push(event));
  try {
    const engine = newEngine(bus);
    const traces = await sendTogether(engine, [200, 201, 202, 203, 204], [202]);
    assert.deepEqual(await rowsIn(200, 300), [200, 201, 203, 204]);
    const failed = traces.get(202)!;
    assert.equal(failed.outcome, 'rejected');
    assert.ok(failed.error instanceof UnitFailed && failed.error.message === 'unit 202', 'the caller gets its own unit\'s error');
    assert.equal(failed.committed, 0);
    assert.ok(failed.rolledBack >= 1);
    for (const n of [200, 201, 203, 204]) {
      const trace = traces.get(n)!;
      assert.equal(trace.outcome, 'resolved', `unit ${n}`);
      assert.equal(trace.committed, 1, `unit ${n} committed once`);
      // On SQLite the units before the failing one ran in the rolled-back attempt too.
      assert.equal(trace.rolledBack, trace.runs - 1, `unit ${n}: every run but the last rolled back`);
    }
    // Each committed unit's event once; none from the failing unit or a rolled-back run.
    assert.deepEqual(heard.map((event) => event.type === 'job_enqueued' && event.agentId).sort(),
      ['agt_probe200', 'agt_probe201', 'agt_probe203', 'agt_probe204']);
    if (TEST_DB === 'sqlite') {
      assert.deepEqual(engine.batchStats, { batches: 1, replays: 1 });
      assert.deepEqual([200, 201, 202].map((n) => traces.get(n)!.runs), [2, 2, 2], 'the units up to the failing one ran twice');
      assert.deepEqual([203, 204].map((n) => traces.get(n)!.runs), [1, 1], 'the units after it ran once, apart');
    }
  } finally {
    stopListening();
    await bus.close();
  }
});

test('a unit alone that fails after writing leaves nothing behind, and is not run again', async () => {
  const engine = newEngine();
  const traces = await sendTogether(engine, [300], [300]);
  assert.deepEqual(await rowsIn(300, 400), []);
  assert.deepEqual({ ...traces.get(300)!, error: undefined }, { runs: 1, committed: 0, rolledBack: 1, outcome: 'rejected', error: undefined });
  if (TEST_DB === 'sqlite') assert.deepEqual(engine.batchStats, { batches: 1, replays: 0 });
});

test('after a replay, the next twenty batches run unit by unit at once, then units run together again', sqliteOnly, async () => {
  const engine = newEngine();
  await sendTogether(engine, [400, 401], [401]);
  assert.deepEqual(engine.batchStats, { batches: 1, replays: 1 });
  // The next failing batch goes straight to savepoints: no unit runs twice.
  const traces = await sendTogether(engine, [410, 411, 412], [411]);
  assert.deepEqual([...traces.values()].map((trace) => trace.runs), [1, 1, 1]);
  assert.deepEqual(await rowsIn(410, 420), [410, 412]);
  assert.deepEqual(engine.batchStats, { batches: 2, replays: 1 });
  for (let i = 0; i < 19; i++) await sendTogether(engine, [500 + 2 * i, 501 + 2 * i]);
  assert.deepEqual(engine.batchStats, { batches: 21, replays: 1 });
  // Twenty batches on, a failure is met by a replay again.
  await sendTogether(engine, [600, 601], [601]);
  assert.deepEqual(engine.batchStats, { batches: 22, replays: 2 });
  assert.deepEqual(await rowsIn(600, 700), [600]);
});
