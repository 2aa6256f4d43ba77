import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { freshDatabase, type TestDatabase } from '../testing/harness.ts';
import { prepared } from './prepared.ts';
import { openStore, type Store } from './store.ts';

let database: TestDatabase;
let store: Store;
before(async () => {
  database = await freshDatabase();
  store = await openStore(database.url, database.pgSchema ? { pgSchema: database.pgSchema } : {});
  const now = new Date().toISOString();
  await store.db.insertInto('users').values([
    { id: 'usr_a', email: 'a@example.test', password_hash: 'x', plan: 'free', created_at: now },
    { id: 'usr_b', email: 'b@example.test', password_hash: 'x', plan: 'pro', created_at: now },
  ]).execute();
});
after(async () => {
  await store.close();
  await database.drop();
});

// Parameters on both sides of a constant, to prove each lands in its own place.
const usersByPlanAndEmail = prepared((db, plan: 'free' | 'pro', email: string) => db.selectFrom('users').select(['id', 'email'])
  .where('plan', '=', plan).where('created_at', '>', '2000-01-01').where('email', '=', email));

// Rows from node:sqlite have no prototype; compare plain copies.
const plain = (rows: object[]) => rows.map((row) => ({ ...row }));

test('a prepared query gives what the builder gives, call after call, with each value in its place', async () => {
  assert.deepEqual(plain(await usersByPlanAndEmail(store.db, 'free', 'a@example.test')), [{ id: 'usr_a', email: 'a@example.test' }]);
  assert.deepEqual(plain(await usersByPlanAndEmail(store.db, 'pro', 'b@example.test')), [{ id: 'usr_b', email: 'b@example.test' }]);
  assert.deepEqual(await usersByPlanAndEmail(store.db, 'pro', 'a@example.test'), []);
  const viaBuilder = await store.db.selectFrom('users').select(['id', 'email']).where('plan', '=', 'pro')
    .where('created_at', '>', '2000-01-01').where('email', '=', 'b@example.test').execute();
  assert.deepEqual(await usersByPlanAndEmail(store.db, 'pro', 'b@example.test'), viaBuilder);
});

const setPlan = prepared((db, plan: 'free' | 'pro', id: string) => db.updateTable('users').set({ plan }).where('id', '=', id));

test('a prepared statement runs inside a transaction, on its connection, and reports the rows it changed', async () => {
  await assert.rejects(store.db.transaction().execute(async (trx) => {
    assert.equal(await setPlan.affected(trx, 'pro', 'usr_a'), 1);
    assert.deepEqual(plain(await usersByPlanAndEmail(trx, 'pro', 'a@example.test')), [{ id: 'usr_a', email: 'a@example.test' }]);
    throw new Error('roll back');
  }), /roll back/);
  // Rolled back with its transaction: it ran on the transaction's connection, not beside it.
  assert.deepEqual(await usersByPlanAndEmail(store.db, 'pro', 'a@example.test'), []);
  assert.equal(await setPlan.affected(store.db, 'pro', 'usr_nobody'), 0);
});

test('outside a transaction a prepared query never runs inside another caller\'s open transaction', async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => { release = resolve; });
  let written!: () => void;
  const wrote = new Promise<void>((resolve) => { written = resolve; });
  const transaction = store.db.transaction().execute(async (trx) => {
    await setPlan.affected(trx, 'pro', 'usr_a');
    written();
    await held;
    throw new Error('roll back');
  }).catch(() => {});
  await wrote;
  // On SQLite both share one connection: the read must wait for the transaction to end, or it
  // would see (and be part of) a write that is then rolled back.
  const read = usersByPlanAndEmail(store.db, 'pro', 'a@example.test');
  release();
  await transaction;
  assert.deepEqual(await read, []);
});

test('a transaction that is over refuses statements instead of running them outside it', async () => {
  const trx = await store.db.startTransaction().execute();
  await trx.commit().execute();
  await assert.rejects(setPlan.affected(trx, 'pro', 'usr_a'), /already committed/);
  assert.deepEqual(await usersByPlanAndEmail(store.db, 'pro', 'a@example.test'), []);
});
