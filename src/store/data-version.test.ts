import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { openStore, type Store } from './store.ts';

/** Store.dataVersion on a real SQLite file, with a second connection and a second process's kind of connection standing in for the CLI. */
let dir: string;
let store: Store;
let other: Store;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-channel-data-version-'));
  store = await openStore(`sqlite:${join(dir, 'test.db')}`);
  other = await openStore(`sqlite:${join(dir, 'test.db')}`);
});
after(async () => {
  await other.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const version = () => store.dataVersion!();
const auditLine = (subject: string) => ({ at: new Date().toISOString(), actor_user_id: null, action: 'test', subject_id: subject, details: null });

test('the commits of this connection never move it, even many in a row, in a transaction or not', async () => {
  const before = version();
  for (let i = 0; i < 20; i++) {
    await store.db.insertInto('audit_log').values(auditLine(`own ${i}`)).execute();
    assert.equal(version(), before);
  }
  await store.db.transaction().execute(async (trx) => {
    await trx.updateTable('api_keys').set({ label: 'x' }).where('id', '=', 'none').execute();
    await trx.insertInto('audit_log').values(auditLine('own in a transaction')).execute();
  });
  assert.equal(version(), before);
});

test('every commit of another connection is seen at the very next call, however many follow each other', async () => {
  for (let i = 0; i < 50; i++) {
    const before = version();
    assert.equal(version(), before, 'nothing committed: unchanged');
    await other.db.insertInto('audit_log').values(auditLine(`other ${i}`)).execute();
    assert.notEqual(version(), before, `commit ${i + 1} seen`);
  }
});

test('a commit by another process is seen at once, within the same task', () => {
  const before = version();
  // As the CLI's commit lands between two instructions of ours: synchronously, on a connection of its own.
  const cli = new DatabaseSync(join(dir, 'test.db'));
  try {
    cli.exec(`insert into audit_log (at, action, subject_id) values ('${new Date().toISOString()}', 'test', 'meanwhile')`);
  } finally {
    cli.close();
  }
  assert.notEqual(version(), before);
});
