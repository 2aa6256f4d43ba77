/**
 * Opening (and so migrating) a store on PostgreSQL while other schemas of the same database
 * come and go: parallel test runs, other apps. Runs in the PostgreSQL pass only.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { randomBase62 } from '../domain/ids.ts';
import { freshDatabase, TEST_DB, TEST_PG_URL } from '../testing/harness.ts';
import { openStore } from './store.ts';

const skip = TEST_DB === 'postgres' ? false : 'PostgreSQL pass only';

test('migrating while other schemas are created and dropped never fails', { skip }, async () => {
  // Another "app" churns schemas whose tables have serial columns, the kind Kysely's catalog
  // query trips over when they vanish under it.
  const churn = new pg.Client({ connectionString: TEST_PG_URL });
  await churn.connect();
  let churning = true;
  const churned = (async () => {
    let rounds = 0;
    while (churning) {
      const name = `churn_${randomBase62(10).toLowerCase()}`;
      await churn.query(`create schema ${name}; create table ${name}.t (id bigserial primary key, a int, b text)`);
      await churn.query(`drop schema ${name} cascade`);
      rounds++;
    }
    return rounds;
  })();

  try {
    for (let i = 0; i < 8; i++) {
      const database = await freshDatabase();
      try {
        const store = await openStore(database.url, { pgSchema: database.pgSchema! });
        // Migrated into its own schema: the tables are there, and only there.
        const { rows } = await store.pgPool!.query<{ count: string }>(
          `select count(*) from pg_tables where schemaname = $1 and tablename = 'turns'`, [database.pgSchema]);
        assert.equal(Number(rows[0]!.count), 1);
        await store.close();
      } finally {
        await database.drop();
      }
    }
  } finally {
    churning = false;
    const rounds = await churned;
    await churn.end();
    assert.ok(rounds > 0, 'the churn ran alongside');
  }
});

test('a store reopened on an existing schema finds its migrations done', { skip }, async () => {
  const database = await freshDatabase();
  const applied = async (store: Awaited<ReturnType<typeof openStore>>) =>
    (await store.pgPool!.query<{ name: string; timestamp: string }>('select name, timestamp from kysely_migration order by name')).rows;
  try {
    const first = await openStore(database.url, { pgSchema: database.pgSchema! });
    const afterFirst = await applied(first);
    await first.close();
    assert.ok(afterFirst.some((m) => m.name === '001_initial'));
    const second = await openStore(database.url, { pgSchema: database.pgSchema! });
    assert.deepEqual(await applied(second), afterFirst, 'nothing applied twice, nothing re-stamped');
    await second.close();
  } finally {
    await database.drop();
  }
});
