/** What the SQLite connection is set up to do, seen from outside: files it opens, under a server's kind of load. */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openNodeSqlite } from './node-sqlite-adapter.ts';

const temporaryFilesOpen = () => readdirSync('/proc/self/fd')
  .map((fd) => { try { return readlinkSync(`/proc/self/fd/${fd}`); } catch { return ''; } })
  .filter((target) => target.includes('etilqs_'));

test('a batch of savepoints that touches many pages keeps its sub-journal in memory, not in a temporary file', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-channel-adapter-'));
  const database = openNodeSqlite(join(dir, 'test.db'));
  try {
    const db = database.raw;
    db.exec('create table t (id integer primary key, v text)');
    const insert = db.prepare('insert into t (v) values (?)');
    db.exec('begin');
    for (let i = 0; i < 2000; i++) insert.run('x'.repeat(200)); // about 100 pages
    db.exec('commit');
    const before = temporaryFilesOpen();
    db.exec('begin immediate');
    // As the engine's batches do: each unit in a savepoint, released, many pages changed in all.
    for (let unit = 0; unit < 40; unit++) {
      db.exec(`savepoint unit${unit}`);
      db.prepare('update t set v = ? where id % 40 = ?').run(`unit ${unit}`, unit);
      db.exec(`release unit${unit}`);
    }
    const during = temporaryFilesOpen();
    db.exec('commit');
    assert.deepEqual(during, before, 'no temporary file was opened for the sub-journal');
    assert.equal((db.prepare('select count(*) as n from t where v like ?').get('unit %') as { n: number }).n, 2000);
  } finally {
    database.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
