/** What the SQLite connection is set up to do, seen from outside: files it opens, under a server's kind of load. */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { openNodeSqlite, type NodeSqliteDatabase } from './node-sqlite-adapter.ts';

/** Runs `fn` with a way to open connections to one fresh database file; closes them and removes the file after. */
function withDatabaseFile(fn: (open: () => NodeSqliteDatabase, path: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'agent-channel-adapter-'));
  const path = join(dir, 'test.db');
  const opened: NodeSqliteDatabase[] = [];
  try {
    fn(() => {
      const database = openNodeSqlite(path);
      opened.push(database);
      return database;
    }, path);
  } finally {
    for (const database of opened.reverse()) database.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const temporaryFilesOpen = () => readdirSync('/proc/self/fd')
  .map((fd) => { try { return readlinkSync(`/proc/self/fd/${fd}`); } catch { return ''; } })
  .filter((target) => target.includes('etilqs_'));

test('a batch of savepoints that touches many pages keeps its sub-journal in memory, not in a temporary file', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  withDatabaseFile((open) => {
    const db = open().raw;
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
  });
});

test('closing one connection leaves the locks of another on the same file in place', () => {
  withDatabaseFile((open, path) => {
    const holder = open();
    holder.raw.exec('create table t (v text)');
    holder.dataVersion();
    holder.raw.exec('begin immediate'); // this connection holds the write lock
    const passerBy = openNodeSqlite(path);
    passerBy.dataVersion(); // as a request does
    passerBy.close();
    // Another process must still find the database locked (POSIX locks are per process: closing
    // any descriptor of the -shm file would have dropped them all).
    const other = spawnSync(process.execPath, ['-e', `
      const { DatabaseSync } = require('node:sqlite');
      const db = new DatabaseSync(${JSON.stringify(path)});
      try { db.exec("insert into t values ('other')"); console.log('wrote'); } catch (e) { console.log(e.message); }
    `], { encoding: 'utf8' });
    assert.match(other.stdout, /locked|busy/i);
    holder.raw.exec("insert into t values ('holder')");
    holder.raw.exec('commit');
    assert.deepEqual(holder.raw.prepare('select v from t').all().map((row) => row.v), ['holder']);
  });
});

test('a commit by another connection made during a read snapshot moves the data version once the snapshot ends', () => {
  withDatabaseFile((open) => {
    const reader = open();
    const writer = open();
    reader.raw.exec('create table t (v text)');
    const before = reader.dataVersion();
    reader.raw.exec('begin'); // deferred: a read snapshot from the first read on
    reader.raw.prepare('select count(*) from t').get();
    writer.raw.exec("insert into t values ('other')");
    assert.equal(reader.dataVersion(), before, 'inside the snapshot the commit is not seen yet');
    reader.raw.exec('commit');
    assert.notEqual(reader.dataVersion(), before, 'seen once the snapshot is over');
  });
});

test('a commit is synced to disk (synchronous FULL) unless the operator chose normal', () => {
  withDatabaseFile((_open, path) => {
    const synchronous = (database: NodeSqliteDatabase) => (database.raw.prepare('PRAGMA synchronous').get() as { synchronous: number }).synchronous;
    const byDefault = openNodeSqlite(path);
    const normal = openNodeSqlite(path, 'normal');
    try {
      assert.equal(synchronous(byDefault), 2, 'FULL: what a client was told was accepted survives a power cut');
      assert.equal(synchronous(normal), 1, 'NORMAL');
    } finally {
      normal.close();
      byDefault.close();
    }
  });
});
