import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, test } from 'node:test';
import { CLI_PATH } from '../testing/cli.ts';
import { TEST_DB } from '../testing/harness.ts';
import { backupSqlite, restoreSqlite } from './sqlite-backup.ts';
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

function markerOf(path: string): string[] {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return db.prepare('select text from marker').all().map((row) => String(row.text));
  } finally {
    db.close();
  }
}

test('a backup cut short (the disk full) leaves no file where it was going', { ...sqliteOnly, skip: sqliteOnly.skip || (process.platform !== 'linux' && 'Linux only (ulimit -f)') }, async () => {
  const source = join(dir, 'big.db');
  await databaseAt(source, 'x'.repeat(200_000));
  const target = join(dir, 'cut-short', 'backup.db');
  // A file-size limit makes the write fail as a full disk does (SIGXFSZ ignored: EFBIG instead).
  const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile('bash', ['-c', `trap '' XFSZ; ulimit -f 64; exec "$0" "$@"`, process.execPath, CLI_PATH, 'backup', '--to', target],
      { env: { ...process.env, DATABASE_URL: `sqlite:${source}` } }, (error, _stdout, stderr) => {
        resolve({ code: error ? Number(error.code) : 0, stderr });
      });
  });
  assert.equal(result.code, 1, result.stderr);
  assert.equal(existsSync(target), false, 'no partial backup left (a second try would be refused: it exists)');
});

test('backup then restore, plainly, still works in process', sqliteOnly, async () => {
  const path = join(dir, 'plain', 'db.sqlite');
  mkdirSync(join(dir, 'plain'));
  await databaseAt(path, 'one');
  const backup = join(dir, 'plain-backup.db');
  backupSqlite(`sqlite:${path}`, backup);
  await databaseAt(path, 'two');
  const keptAs = restoreSqlite(`sqlite:${path}`, backup);
  assert.deepEqual(markerOf(path), ['one']);
  assert.deepEqual(markerOf(keptAs!), ['two']);
  assert.deepEqual(readdirSync(join(dir, 'plain')).filter((n) => !n.startsWith('db.sqlite.replaced-')).sort(), ['db.sqlite', 'db.sqlite.lock']);
});
