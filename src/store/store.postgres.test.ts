/**
 * Opening (and so migrating) a store on PostgreSQL while other schemas of the same database
 * come and go: parallel test runs, other apps. Runs in the PostgreSQL pass only.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import pg from 'pg';
import { randomBase62 } from '../domain/ids.ts';
import { freshDatabase, TEST_DB, TEST_PG_URL } from '../testing/harness.ts';
import { proxyInFrontOf } from '../testing/frozen-database.ts';
import { notifyAtCommit, sendAhead } from './postgres-dialect.ts';
import { isStoreUnavailable } from './unavailable.ts';
import { openStore, type Store } from './store.ts';

const skip = TEST_DB === 'postgres' ? false : 'PostgreSQL pass only';

/**
 * A store on a fresh schema with one pooled connection (so each statement meets what the ones
 * before it left on that connection), and a second, plain client beside it. Cleans up all.
 */
async function withOneConnectionStore(fn: (store: Store, other: pg.Client, schema: string) => Promise<void>): Promise<void> {
  const database = await freshDatabase();
  const store = await openStore(database.url, { pgSchema: database.pgSchema!, pgPoolSize: 1 });
  const other = new pg.Client({ connectionString: TEST_PG_URL });
  try {
    await other.connect();
    await fn(store, other, database.pgSchema!);
  } finally {
    await other.end();
    await store.close();
    await database.drop();
  }
}

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

test('parameterised statements are prepared once per connection and reused', { skip }, () => withOneConnectionStore(async (store) => {
  const marker = `prepared_${randomBase62(8)}`;
  const text = `select $1::text as "${marker}"`;
  const prepared = async () => (await store.db.executeQuery<{ n: string }>(CompiledQuery.raw(
    `select count(*)::text as n from pg_prepared_statements where statement = $1`, [text]))).rows[0]!.n;
  assert.equal(await prepared(), '0');
  for (let i = 0; i < 3; i++) {
    const { rows } = await store.db.executeQuery<Record<string, string>>(CompiledQuery.raw(text, [`value ${i}`]));
    assert.equal(rows[0]![marker], `value ${i}`, 'each call binds its own values');
  }
  assert.equal(await prepared(), '1', 'one prepared statement on the one connection, reused');
  // The pool's own query (callbacks underneath, as the rate limiter calls it) is prepared alike.
  const viaPool = `select $1::int + 1 as "${marker}"`;
  for (let i = 0; i < 2; i++) assert.equal((await store.pgPool!.query(viaPool, [i])).rows[0][marker], i + 1);
  const { rows: poolPrepared } = await store.pgPool!.query(`select count(*)::int as n from pg_prepared_statements where statement = $1`, [viaPool]);
  assert.equal(poolPrepared[0].n, 1);
  // A named statement that fails (a unique violation here) leaves the connection usable.
  await store.db.executeQuery(CompiledQuery.raw(`create temporary table once (k text primary key)`));
  const insert = `insert into once (k) values ($1)`;
  await store.db.executeQuery(CompiledQuery.raw(insert, ['a']));
  await assert.rejects(store.db.executeQuery(CompiledQuery.raw(insert, ['a'])), /duplicate key/);
  await store.db.executeQuery(CompiledQuery.raw(insert, ['b']));
  const { rows } = await store.db.executeQuery<{ k: string }>(CompiledQuery.raw(`select k from once where k <> $1 order by k`, ['']));
  assert.deepEqual(rows.map((r) => r.k), ['a', 'b']);
}));

test('notifications staged in a transaction go out with its commit, never after a rollback', { skip }, () => withOneConnectionStore(async (store, listener, schema) => {
  // One connection: whatever a transaction left staged would go out with the next one's commit.
  const channel = `test_${schema}`;
  const heard: string[] = [];
  listener.on('notification', (message) => { if (message.channel === channel) heard.push(message.payload ?? ''); });
  await listener.query(`LISTEN "${channel}"`);
  const tricky = `it's "quoted" \\ and ; commit; -- not SQL`;
  await store.db.transaction().execute(async (trx) => {
    await notifyAtCommit(trx, channel, 'first');
    await notifyAtCommit(trx, channel, tricky);
    await sql`select 1`.execute(trx);
  });
  await assert.rejects(store.db.transaction().execute(async (trx) => {
    await notifyAtCommit(trx, channel, 'rolled back');
    throw new Error('roll back');
  }), /roll back/);
  await store.db.transaction().execute(async (trx) => { await notifyAtCommit(trx, channel, 'second'); });
  // Rolled back to a savepoint: what was staged after it is dropped, what was staged before stays.
  const trx = await store.db.startTransaction().execute();
  await notifyAtCommit(trx, channel, 'before the savepoint');
  const inner = await trx.savepoint('inner').execute();
  await notifyAtCommit(inner, channel, 'after the savepoint');
  await inner.rollbackToSavepoint('inner').execute();
  await trx.commit().execute();
  // A statement that fails leaves the transaction aborted: PostgreSQL refuses the staged
  // notification with the commit, and the notification is never heard (checked below).
  await assert.rejects(store.db.transaction().execute(async (trx) => {
    await notifyAtCommit(trx, channel, 'aborted');
    await sql`select 1 / 0`.execute(trx).catch(() => {});
  }), /division by zero/); // the failure that aborted the transaction, not "current transaction is aborted"
  await store.db.transaction().execute(async (trx) => { await notifyAtCommit(trx, channel, 'last'); });
  const deadline = Date.now() + 5000;
  while (!heard.includes('last') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(heard, ['first', tricky, 'second', 'before the savepoint', 'last']);
}));

test('a statement sent ahead runs in its transaction before the next one; its failure is the next statement\'s, or the commit\'s', { skip }, () => withOneConnectionStore(async (store) => {
  const setting = sql<{ value: string | null }>`select current_setting('ac.ahead', true) as value`;
  const seen = await store.db.transaction().execute(async (trx) => {
    await sendAhead(trx, sql`select set_config('ac.ahead', 'set', true)`.compile(trx)); // true: for this transaction only
    return (await setting.execute(trx)).rows[0]!.value;
  });
  assert.equal(seen, 'set');
  assert.ok([null, ''].includes((await setting.execute(store.db)).rows[0]!.value), 'the setting ended with its transaction');
  // Pipelined behind a failure, a statement (or a commit) is told of that failure, not of an aborted transaction.
  await assert.rejects(store.db.transaction().execute(async (trx) => {
    await sendAhead(trx, sql`select 1 / 0`.compile(trx));
    await sql`select 1`.execute(trx);
  }), /division by zero/);
  await assert.rejects(store.db.transaction().execute(async (trx) => {
    await sendAhead(trx, sql`select 1 / 0`.compile(trx));
  }), /division by zero/);
  await assert.rejects(store.db.transaction().execute(async (trx) => {
    await sendAhead(trx, sql`select 1 / 0`.compile(trx));
    await sql`select * from (select ${1}::int as one) t`.execute(trx); // unprepared: answered by a shorter path than a prepared one
  }), /division by zero/);
  // A failure undone by a rollback to its savepoint is not the cause of a later one.
  const trx = await store.db.startTransaction().execute();
  const inner = await trx.savepoint('inner').execute();
  await assert.rejects(sql`select 1 / 0`.execute(inner), /division by zero/);
  await inner.rollbackToSavepoint('inner').execute();
  await sendAhead(trx, sql`select 'not a number'::int`.compile(trx));
  await assert.rejects(sql`select 1`.execute(trx), /invalid input syntax/);
  await trx.rollback().execute();
  assert.deepEqual((await sql<{ one: number }>`select 1 as one`.execute(store.db)).rows, [{ one: 1 }]); // the connection is fine
}));

test('a lock sent ahead that waits past the statement timeout fails its transaction as an outage', { skip }, async () => {
  const database = await freshDatabase();
  const store = await openStore(database.url, { pgSchema: database.pgSchema!, pgPoolSize: 1, pgStatementTimeoutMs: 300 });
  const holder = new pg.Client({ connectionString: TEST_PG_URL });
  try {
    await holder.connect();
    await holder.query('select pg_advisory_lock(424242)');
    const failure = await store.db.transaction().execute(async (trx) => {
      await sendAhead(trx, sql`select pg_advisory_xact_lock(424242)`.compile(trx));
      await sql`select 1`.execute(trx);
    }).then(() => assert.fail('the lock is held elsewhere'), (error: unknown) => error);
    assert.equal((failure as { code?: string }).code, '57014');
    assert.ok(isStoreUnavailable(failure));
  } finally {
    await holder.end();
    await store.close();
    await database.drop();
  }
});

test('a migration elsewhere (a rolling deploy) never leaves a prepared statement failing', { skip }, () => withOneConnectionStore(async (store, other, schema) => {
  const run = async <R>(text: string, values: unknown[]) => (await store.db.executeQuery<R>(CompiledQuery.raw(text, values))).rows;
  await other.query(`create table ${schema}.evolving (k text primary key)`);
  await other.query(`insert into ${schema}.evolving values ('a')`);
  // All of a table's columns: never prepared, so a column added later simply appears.
  const everything = `select * from evolving where k = $1`;
  assert.deepEqual(await run(everything, ['a']), [{ k: 'a' }]);
  await other.query(`alter table ${schema}.evolving add column extra int default 7`);
  assert.deepEqual(await run(everything, ['a']), [{ k: 'a', extra: 7 }]);
  // Named columns: prepared. A column whose type changes fails the statement once, then it is prepared afresh.
  const named = `select k from evolving where k = $1`;
  assert.deepEqual(await run(named, ['a']), [{ k: 'a' }]);
  await other.query(`alter table ${schema}.evolving alter column k type varchar(20)`);
  await assert.rejects(run(named, ['a']), /cached plan must not change result type/);
  assert.deepEqual(await run(named, ['a']), [{ k: 'a' }]);
  assert.deepEqual(await run(named, ['a']), [{ k: 'a' }]);
}));

test('a connection the server drops between two statements of a transaction fails that transaction, not the process; the next query works', { skip }, () => withOneConnectionStore(async (store, other) => {
  const transaction = store.db.transaction().execute(async (trx) => {
    const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
    // Dropped while this transaction holds it and sends nothing (a failover, a restart, an
    // idle-in-transaction timeout): pg then emits 'error' on a client the pool is not watching.
    await other.query('select pg_terminate_backend($1)', [rows[0]!.pid]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await sql`select 1`.execute(trx);
  });
  await assert.rejects(transaction);
  const { rows } = await sql<{ ok: number }>`select 1 as ok`.execute(store.db);
  assert.equal(rows[0]!.ok, 1, 'the pool replaced the dropped connection');
}));

test('a statement runs at most its statement timeout; on a database that stops answering it fails a little later, its connection dropped, and the pool recovers once it answers', { skip, timeout: 60_000 }, async () => {
  const database = await freshDatabase();
  const { proxy, url } = await proxyInFrontOf(TEST_PG_URL);
  const store = await openStore(url, { pgSchema: database.pgSchema!, pgStatementTimeoutMs: 500 });
  try {
    await assert.rejects(sql`select pg_sleep(3)`.execute(store.db), /canceling statement due to statement timeout/, 'the server cancels it');
    proxy.freeze(); // the connection is open and idle in the pool: its next statement meets silence
    await assert.rejects(store.ping(), /^Error: PostgreSQL did not answer within 5\.5 s: the connection was dropped$/);
    proxy.thaw();
    await store.ping(); // on a new connection
  } finally {
    proxy.thaw();
    await store.close();
    await proxy.close();
    await database.drop();
  }
});
