/** What the runtime builds from the configuration, seen on the server's own database connection. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import type { DB } from './store/schema.ts';
import { TEST_DB, withTestApp } from './testing/harness.ts';

const onSqlite = TEST_DB === 'sqlite' ? false : 'SQLite only (the SQLite pass)';

test('the server syncs each commit to disk by default, and only at checkpoints with SQLITE_SYNCHRONOUS=normal', { skip: onSqlite }, async () => {
  const synchronous = async (db: Kysely<DB>) => (await sql<{ synchronous: number }>`pragma synchronous`.execute(db)).rows[0]!.synchronous;
  await withTestApp(async (t) => assert.equal(await synchronous(t.runtime.store.db), 2, 'FULL'));
  await withTestApp(async (t) => assert.equal(await synchronous(t.runtime.store.db), 1, 'NORMAL'), { sqliteSynchronous: 'normal' });
});

test('on PostgreSQL the server opens at most PG_POOL_SIZE connections for its work, however much is asked of it at once', { skip: TEST_DB !== 'postgres' && 'PostgreSQL only (the PostgreSQL pass)' }, async () => {
  await withTestApp(async (t) => {
    const pool = t.runtime.store.pgPool!;
    const backends = new Set<number>();
    await Promise.all(Array.from({ length: 8 }, async () => {
      const { rows } = await pool.query<{ pid: number }>('select pg_backend_pid() as pid, pg_sleep(0.05)');
      backends.add(rows[0]!.pid);
    }));
    assert.equal(backends.size, 3, `eight statements at once ran on ${backends.size} connections`);
  }, { pgPoolSize: 3 });
});
