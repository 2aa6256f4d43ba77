import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { TEST_DB } from '../testing/harness.ts';
import { backupSqlite, restoreSqlite } from './sqlite-backup.ts';
import { openStore } from './store.ts';

/**
 * A SQLite database holds password hashes, key digests and the sealing key of the cookie that
 * carries a new key's secret: what the service makes for it is readable by its owner alone.
 */

const skip = (TEST_DB !== 'sqlite' && 'SQLite pass only') || (process.platform === 'win32' && 'POSIX file modes');
let dir: string;
before(() => { dir = mkdtempSync(join(tmpdir(), 'agent-channel-modes-')); });
after(() => { rmSync(dir, { recursive: true, force: true }); });

const modeOf = (path: string) => statSync(path).mode & 0o777;

test('a new database, its folder, its log and a backup of it are the owner\'s alone; restored, it keeps the mode it replaces', { skip }, async () => {
  const previous = process.umask(0o022); // the usual umask, which left them readable by all
  try {
    const folder = join(dir, 'made', 'here');
    const path = join(folder, 'agent-channel.db');
    const store = await openStore(`sqlite:${path}`);
    try {
      await store.db.insertInto('users').values({
        id: 'usr_modes', email: 'modes@example.test', password_hash: 'x', plan: 'free', created_at: new Date().toISOString(),
      }).execute();
      assert.equal(modeOf(folder), 0o700, 'the folder made for it');
      assert.equal(modeOf(join(dir, 'made')), 0o700, 'and the one above, made too');
      for (const file of [path, `${path}-wal`, `${path}-shm`]) {
        assert.ok(existsSync(file), file);
        assert.equal(modeOf(file), 0o600, file);
      }
      const backup = join(dir, 'backups', 'copy.db');
      backupSqlite(`sqlite:${path}`, backup);
      assert.equal(modeOf(backup), 0o600, 'the backup');
    } finally {
      await store.close();
    }

    // An operator's own mode (a group that reads it) is kept, by an open and by a restore.
    chmodSync(path, 0o640);
    await (await openStore(`sqlite:${path}`)).close();
    assert.equal(modeOf(path), 0o640, 'an existing file keeps its mode');
    restoreSqlite(`sqlite:${path}`, join(dir, 'backups', 'copy.db'));
    assert.equal(modeOf(path), 0o640, 'the restored database takes the mode of the one it replaced');

    const fresh = join(dir, 'fresh', 'restored.db');
    restoreSqlite(`sqlite:${fresh}`, join(dir, 'backups', 'copy.db'));
    assert.equal(modeOf(fresh), 0o600, 'restored where there was none');
  } finally {
    process.umask(previous);
  }
});

test('the server\'s lock file beside the database is the owner\'s alone: a reader could keep every server from starting', { skip }, async () => {
  const previous = process.umask(0o022);
  try {
    const path = join(dir, 'locked.db');
    const store = await openStore(`sqlite:${path}`, { forServer: true });
    try {
      assert.equal(modeOf(`${path}.lock`), 0o600, 'the lock');
      // Its journal, open while the lock is held, takes the lock file's mode.
      if (existsSync(`${path}.lock-journal`)) assert.equal(modeOf(`${path}.lock-journal`), 0o600, 'the lock\'s journal');
    } finally {
      await store.close();
    }
  } finally {
    process.umask(previous);
  }
});

test('restored by root (sudo) over a service\'s database, the file stays the service\'s, which could not open it otherwise', { skip: skip || (process.getuid?.() !== 0 && 'needs root') }, async () => {
  const path = join(dir, 'service', 'db.sqlite');
  await (await openStore(`sqlite:${path}`)).close();
  const backup = join(dir, 'service-backup.db');
  backupSqlite(`sqlite:${path}`, backup);
  chownSync(path, 65534, 65534); // the service's own user (nobody, here)
  restoreSqlite(`sqlite:${path}`, backup);
  const { uid, gid } = statSync(path);
  assert.deepEqual([uid, gid, modeOf(path)], [65534, 65534, 0o600]);
});

test('a database named through a symbolic link to a file not made yet is made the owner\'s alone too', { skip }, async () => {
  const previous = process.umask(0o022);
  try {
    mkdirSync(join(dir, 'link-target'));
    const target = join(dir, 'link-target', 'real.db');
    const link = join(dir, 'linked.db');
    symlinkSync(target, link);
    await (await openStore(`sqlite:${link}`)).close();
    assert.ok(existsSync(target), 'made where the link leads');
    assert.equal(modeOf(target), 0o600);
  } finally {
    process.umask(previous);
  }
});
