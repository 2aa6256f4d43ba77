import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs, { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, test } from 'node:test';
import { CLI_PATH } from '../testing/cli.ts';
import { childEnv, TEST_DB } from '../testing/harness.ts';
import { backupSqlite, restoreSqlite } from './sqlite-backup.ts';
import { SqliteServerLock } from './sqlite-server-lock.ts';
import { openStore } from './store.ts';

/**
 * backup and restore at their edges, in process (fast): a symbolic link, `:memory:`, a backup with
 * commits in its log, a database that is not one, a last step that fails, a backup cut short.
 */

const sqliteOnly = { skip: TEST_DB !== 'sqlite' && 'SQLite pass only' };
let dir: string;
before(() => { dir = mkdtempSync(join(tmpdir(), 'agent-channel-backup-edge-')); });
after(() => { rmSync(dir, { recursive: true, force: true }); });

/** A migrated agent-channel database at `path`, with `marker` as its one instance-secret-free row (a table of the test's). */
async function databaseAt(path: string, marker: string): Promise<void> {
  const store = await openStore(`sqlite:${path}`);
  await store.close();
  const db = new DatabaseSync(path);
  db.exec(`create table if not exists marker (text text); delete from marker; insert into marker values ('${marker}')`);
  db.close();
}

/** `db.sqlite` as databaseAt makes it, in a folder of its own (`name`; openStore makes the folder). */
async function databaseIn(name: string, marker: string): Promise<string> {
  const path = join(dir, name, 'db.sqlite');
  await databaseAt(path, marker);
  return path;
}

function markerOf(path: string): string[] {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return db.prepare('select text from marker').all().map((row) => String(row.text));
  } finally {
    db.close();
  }
}

test('through a symbolic link, restore replaces the database it points to, and the link stays', sqliteOnly, async () => {
  const real = join(dir, 'link-case', 'disk', 'db.sqlite');
  const link = join(dir, 'link-case', 'db.sqlite');
  mkdirSync(join(dir, 'link-case', 'disk'), { recursive: true });
  await databaseAt(real, 'old');
  const backup = join(dir, 'link-case', 'backup.db');
  await databaseAt(backup, 'restored');
  symlinkSync(real, link);
  const keptAs = restoreSqlite(`sqlite:${link}`, backup);
  assert.ok(lstatSync(link).isSymbolicLink(), 'the link is still a link');
  assert.deepEqual(markerOf(real), ['restored'], 'the file the server reads is the backup');
  assert.ok(keptAs && !lstatSync(keptAs).isSymbolicLink(), 'the database kept is a file, not a link to one');
  assert.deepEqual(markerOf(keptAs), ['old']);
});

test('restore refuses the database itself (named through a link too) as its own backup, and changes nothing', sqliteOnly, async () => {
  const real = join(dir, 'itself', 'db.sqlite');
  mkdirSync(join(dir, 'itself'), { recursive: true });
  await databaseAt(real, 'only');
  symlinkSync(real, join(dir, 'itself', 'link.db'));
  for (const from of [real, join(dir, 'itself', 'link.db')]) {
    assert.throws(() => restoreSqlite(`sqlite:${real}`, from), /is the database itself, not a backup of it; nothing was changed/);
  }
  assert.deepEqual(readdirSync(join(dir, 'itself')).sort(), ['db.sqlite', 'link.db']);
  assert.deepEqual(markerOf(real), ['only']);
});

test('backup and restore refuse a :memory: database, and make no file', sqliteOnly, async () => {
  const backup = join(dir, 'memory-backup.db');
  await databaseAt(backup, 'x');
  const cwd = process.cwd();
  const here = join(dir, 'memory-cwd');
  mkdirSync(here);
  process.chdir(here);
  try {
    assert.throws(() => restoreSqlite('sqlite::memory:', backup), /:memory:/);
    assert.throws(() => backupSqlite('sqlite::memory:', join(here, 'copy.db')), /^Error: DATABASE_URL names a database in memory \(sqlite::memory:\): there is no file to back up$/);
    assert.deepEqual(readdirSync(here), []);
  } finally {
    process.chdir(cwd);
  }
});

test('restore from a database whose commits are still in its write-ahead log carries them', sqliteOnly, async () => {
  const source = join(dir, 'wal-source.db');
  await databaseAt(source, 'in the file');
  // A commit left in the log: the connection is not closed (closing would checkpoint it).
  const writer = new DatabaseSync(source);
  writer.exec('PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0');
  writer.exec(`insert into marker values ('in the log')`);
  try {
    const target = join(dir, 'wal-target', 'db.sqlite');
    restoreSqlite(`sqlite:${target}`, source);
    assert.deepEqual(markerOf(target).sort(), ['in the file', 'in the log']);
  } finally {
    writer.close();
  }
});

test('a backup from a newer release (a migration this one lacks) is refused before anything changes', sqliteOnly, async () => {
  const path = await databaseIn('newer-case', 'current');
  const backup = join(dir, 'newer-case', 'from-a-newer-release.db');
  backupSqlite(`sqlite:${path}`, backup); // then marked as a newer release would have left it
  const db = new DatabaseSync(backup);
  db.exec(`insert into kysely_migration (name, timestamp) values ('999_from_a_newer_release', '${new Date().toISOString()}')`);
  db.close();
  const before = readdirSync(join(dir, 'newer-case')).sort();
  assert.throws(() => restoreSqlite(`sqlite:${path}`, backup),
    /^Error: .*from-a-newer-release\.db cannot be restored by this release: this database was migrated by a newer release of agent-channel \(it records migration 999_from_a_newer_release, /);
  assert.deepEqual(readdirSync(join(dir, 'newer-case')).sort(), before);
  assert.deepEqual(markerOf(path), ['current']);
});

test('restore over a file that is not a database says which file, and changes nothing', sqliteOnly, async () => {
  const folder = join(dir, 'garbage-case');
  mkdirSync(folder);
  const path = join(folder, 'db.sqlite');
  writeFileSync(path, 'x'.repeat(8192));
  const backup = join(dir, 'garbage-backup.db');
  await databaseAt(backup, 'x');
  assert.throws(() => restoreSqlite(`sqlite:${path}`, backup), (error: Error) => {
    assert.ok(error.message.includes(path), error.message);
    assert.match(error.message, /nothing was changed/);
    return true;
  });
  assert.deepEqual(readdirSync(folder).filter((name) => !name.endsWith('.lock')), ['db.sqlite']);
});

test('a restore whose last step fails leaves the database it was replacing in place', sqliteOnly, async () => {
  const path = await databaseIn('interrupted', 'old');
  const backup = join(dir, 'interrupted-backup.db');
  await databaseAt(backup, 'new');
  const renameSync = fs.renameSync;
  fs.renameSync = (from, to) => {
    if (String(to) === path) throw new Error('interrupted (a test\'s)');
    return renameSync(from, to);
  };
  syncBuiltinESMExports();
  try {
    assert.throws(() => restoreSqlite(`sqlite:${path}`, backup), /interrupted/);
  } finally {
    fs.renameSync = renameSync;
    syncBuiltinESMExports();
  }
  assert.ok(existsSync(path), 'a server started now would make an empty database here');
  assert.deepEqual(markerOf(path), ['old']);
});

test('a backup cut short (the disk full) leaves no file where it was going', { ...sqliteOnly, skip: sqliteOnly.skip || (process.platform !== 'linux' && 'Linux only (ulimit -f)') }, async () => {
  const source = join(dir, 'big.db');
  await databaseAt(source, 'x'.repeat(200_000));
  const target = join(dir, 'cut-short', 'backup.db');
  // A file-size limit makes the write fail as a full disk does (SIGXFSZ ignored: EFBIG instead).
  const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile('bash', ['-c', `trap '' XFSZ; ulimit -f 64; exec "$0" "$@"`, process.execPath, CLI_PATH, 'backup', '--to', target],
      { env: { ...childEnv(), DATABASE_URL: `sqlite:${source}` } }, (error, _stdout, stderr) => {
        resolve({ code: error ? Number(error.code) : 0, stderr });
      });
  });
  assert.equal(result.code, 1, result.stderr);
  assert.equal(existsSync(target), false, 'no partial backup left (a second try would be refused: it exists)');
});

test('backup then restore, plainly, still works in process', sqliteOnly, async () => {
  const path = await databaseIn('plain', 'one');
  const backup = join(dir, 'plain-backup.db');
  backupSqlite(`sqlite:${path}`, backup);
  await databaseAt(path, 'two');
  const keptAs = restoreSqlite(`sqlite:${path}`, backup);
  assert.deepEqual(markerOf(path), ['one']);
  assert.deepEqual(markerOf(keptAs!), ['two']);
  assert.deepEqual(readdirSync(join(dir, 'plain')).filter((n) => !n.startsWith('db.sqlite.replaced-')).sort(), ['db.sqlite', 'db.sqlite.lock']);
});

test('restore refused while a server holds the database says to stop it, and changes nothing', sqliteOnly, async () => {
  const path = await databaseIn('served', 'serving');
  const backup = join(dir, 'served-backup.db');
  await databaseAt(backup, 'backup');
  const server = SqliteServerLock.acquire(path); // what a running server holds
  try {
    assert.throws(() => restoreSqlite(`sqlite:${path}`, backup),
      { message: `an agent-channel server (or another restore) is running on ${path}: stop it, then restore; nothing was changed` });
  } finally {
    server.release();
  }
  assert.deepEqual(markerOf(path), ['serving']);
  assert.deepEqual(readdirSync(join(dir, 'served')).filter((n) => /replaced|restoring/.test(n)), [], 'nothing kept or left half-made');
});

test('restore from a folder says it is a folder, and changes nothing', sqliteOnly, async () => {
  const path = await databaseIn('folder-case', 'kept');
  const folder = join(dir, 'folder-case', 'backups');
  mkdirSync(folder);
  assert.throws(() => restoreSqlite(`sqlite:${path}`, folder),
    { message: `${folder} is a folder, not a backup: name the backup file in it; nothing was changed` });
  assert.deepEqual(markerOf(path), ['kept']);
});
