import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { sql } from 'kysely';
import { openStore, type Store } from './store.ts';

/** Store.accountGeneration on a real SQLite file, with a second connection standing in for the CLI. */
let dir: string;
let store: Store;
let other: Store;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-channel-generation-'));
  store = await openStore(`sqlite:${join(dir, 'test.db')}`);
  other = await openStore(`sqlite:${join(dir, 'test.db')}`);
});
after(async () => {
  await other.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const generation = () => store.accountGeneration!();
const touchKeys = (db: Store['db']) => db.updateTable('api_keys').set({ label: 'x' }).where('id', '=', 'none').execute();

test('reads and writes to other tables leave it as it is', async () => {
  const before = generation();
  await store.db.selectFrom('api_keys').selectAll().execute();
  await store.db.insertInto('audit_log').values({ at: new Date().toISOString(), actor_user_id: null, action: 'test', subject_id: 'x', details: null }).execute();
  assert.equal(generation(), before);
});

test('a write of this connection to an account table moves it', async () => {
  for (const write of [
    () => touchKeys(store.db),
    () => store.db.deleteFrom('agents').where('id', '=', 'none').execute(),
    () => store.db.deleteFrom('memberships').where('user_id', '=', 'none').execute(),
    () => store.db.updateTable('users').set({ plan: 'pro' }).where('id', '=', 'none').execute(),
    () => store.db.deleteFrom('workspaces').where('id', '=', 'none').execute(),
  ]) {
    const before = generation();
    await write();
    assert.ok(generation() > before);
  }
});

test('inside a transaction it moves at the write and again when the transaction ends, committed or not', async () => {
  for (const outcome of ['commit', 'rollback'] as const) {
    const seen: number[] = [generation()];
    await store.db.transaction().execute(async (trx) => {
      await touchKeys(trx);
      seen.push(generation());
      await sql`select 1`.execute(trx);
      seen.push(generation());
      if (outcome === 'rollback') throw new Error('roll back');
    }).catch(() => {});
    seen.push(generation());
    assert.ok(seen[1]! > seen[0]!, `${outcome}: moved at the write`);
    assert.equal(seen[2], seen[1], `${outcome}: a read changes nothing`);
    assert.ok(seen[3]! > seen[2]!, `${outcome}: moved again at the end`);
  }
});

test('a commit by another connection or process moves it', async () => {
  const before = generation();
  // SQLite sees commits per file, not per table: any change another connection commits counts.
  await other.db.insertInto('audit_log').values({ at: new Date().toISOString(), actor_user_id: null, action: 'test', subject_id: 'y', details: null }).execute();
  assert.ok(generation() > before);
  const after = generation();
  assert.equal(generation(), after, 'and it stays until the next write');
});

test('every commit of another connection is seen at the very next call, however many follow each other', async () => {
  for (let i = 0; i < 50; i++) {
    const before = generation();
    assert.equal(generation(), before, 'nothing committed: unchanged');
    await other.db.insertInto('audit_log').values({ at: new Date().toISOString(), actor_user_id: null, action: 'test', subject_id: `other ${i}`, details: null }).execute();
    assert.ok(generation() > before, `commit ${i + 1} seen`);
  }
});

test('the commits of this connection alone never move it, even many in a row', async () => {
  const before = generation();
  for (let i = 0; i < 50; i++) {
    await store.db.insertInto('audit_log').values({ at: new Date().toISOString(), actor_user_id: null, action: 'test', subject_id: `own ${i}`, details: null }).execute();
    assert.equal(generation(), before);
  }
});

test('within one task the first answer holds while no statement runs (one look for a whole request); the next task sees a commit made meanwhile', async () => {
  await Promise.resolve(); // a task of its own from here
  const before = generation();
  // Another process commits while this task runs (synchronously, as the CLI's commit lands between two instructions of ours).
  const cli = new DatabaseSync(join(dir, 'test.db'));
  try {
    cli.exec(`insert into audit_log (at, action, subject_id) values ('${new Date().toISOString()}', 'test', 'meanwhile')`);
  } finally {
    cli.close();
  }
  assert.equal(generation(), before, 'the task began before the commit: its first answer still holds');
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(generation() > before, 'a later task sees the other process\'s commit');
});
