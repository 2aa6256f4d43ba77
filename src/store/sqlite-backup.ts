import { chmodSync, chownSync, closeSync, existsSync, fsyncSync, linkSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { isPostgresUrl, sqlitePathOf, whyMigrationsUnknownHere } from './store.ts';
import { makeFolder, makePrivateFile, PRIVATE_FILE } from './private-files.ts';
import { isSqliteBusy } from './node-sqlite-adapter.ts';
import { realPathOf, SqliteServerLock } from './sqlite-server-lock.ts';

/**
 * Backing up and restoring a SQLite database (the CLI's `backup` and `restore`). A copy of the
 * file alone is not a backup: commits live in its write-ahead log (`-wal`) until a checkpoint, and
 * a copy taken while the server writes may catch a page half-changed. PostgreSQL has its own tools.
 */

const ON_POSTGRES = 'on PostgreSQL, use its own tools: pg_dump (with --schema when DATABASE_URL names one) and pg_restore';

/**
 * Writes a consistent copy of the database at `to` (a new file), also while a server writes to it:
 * SQLite's `VACUUM INTO` reads one snapshot (every commit before it, none after) and writes it
 * compacted, without the log. The copy is checked, and synced to disk, before this returns.
 */
export function backupSqlite(databaseUrl: string, to: string): void {
  if (isPostgresUrl(databaseUrl)) throw new Error(`backup works on a SQLite database; ${ON_POSTGRES}`);
  const path = existingDatabase(databaseUrl);
  const target = resolve(to);
  makeFolder(dirname(target));
  // The file made here, empty (VACUUM INTO writes into an empty file), so that it is ours to
  // remove when the copy is cut short (a full disk, say): a part left would look like a backup,
  // and the next try would be refused as "already exists".
  try {
    closeSync(openSync(target, 'wx', PRIVATE_FILE)); // a backup holds what the database holds
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new Error(`${target} already exists: a backup is written to a new file`);
    throw new Error(`cannot write the backup to ${target}: ${(error as Error).message}`, { cause: error });
  }
  try {
    const source = new DatabaseSync(path, { readOnly: true, timeout: 5_000 });
    try {
      source.prepare('VACUUM INTO ?').run(target);
    } catch (error) {
      throw new Error(`cannot write the backup to ${target}: ${(error as Error).message}`, { cause: error });
    } finally {
      source.close();
    }
    const problem = whyNotADatabaseOfOurs(target);
    if (problem) throw new Error(`the copy written to ${target} does not read back (${problem})`);
    syncToDisk(target);
    syncFolderOf(target);
  } catch (error) {
    rmSync(target, { force: true });
    throw error;
  }
}

/**
 * Puts the backup at `from` in the database's place, with no server running on it. The database
 * replaced is kept beside it, whole (its log checkpointed into it first), as
 * `<database>.replaced-<time>`; returns that path (null when there was none).
 */
export function restoreSqlite(databaseUrl: string, from: string, now = new Date()): string | null {
  if (isPostgresUrl(databaseUrl)) throw new Error(`restore works on a SQLite database; ${ON_POSTGRES}`);
  const named = sqlitePathOf(databaseUrl);
  if (named === ':memory:') throw new Error('DATABASE_URL names a database in memory (sqlite::memory:): there is no file to restore into');
  const backup = resolve(from);
  if (!existsSync(backup)) throw new Error(`no backup at ${backup}`);
  // (SQLite would call it a "disk I/O error".)
  if (statSync(backup).isDirectory()) throw new Error(`${backup} is a folder, not a backup: name the backup file in it; nothing was changed`);
  if (existsSync(named) && realPathOf(backup) === realPathOf(resolve(named))) {
    throw new Error(`${backup} is the database itself, not a backup of it; nothing was changed`);
  }
  const problem = whyNotADatabaseOfOurs(backup);
  if (problem) throw new Error(`${backup} is not a backup of an agent-channel database (${problem}); nothing was changed`);
  // One this release could not open (a newer release's): refused now, not at the next start.
  const tooNew = whyMigrationsUnknownHere(migrationsIn(backup));
  if (tooNew) throw new Error(`${backup} cannot be restored by this release: ${tooNew}`);
  makeFolder(dirname(resolve(named)));
  // The file itself, through any symbolic link to it or to a folder above it: the link is left
  // as it is, and what it points to (what the server reads) is replaced and kept.
  const path = realPathOf(resolve(named));
  // Held throughout: no server starts on the file while it is being replaced. A server running
  // now makes this fail, with the reason, before anything is touched.
  const lock = lockForRestore(path);
  const incoming = `${path}.restoring`;
  let keptAs: string | null = null;
  let linked = false;
  try {
    // The copy first, beside the database, whole and on disk: a full disk fails here, with the
    // database still in place. VACUUM INTO, not a copy of the file: a backup whose last commits
    // are still in its own write-ahead log (a copy of a stopped server's folder) carries them.
    rmSync(incoming, { force: true }); // (left by a restore cut short; the lock makes it ours)
    makePrivateFile(incoming);
    const source = new DatabaseSync(backup, { readOnly: true, timeout: 5_000 });
    try {
      source.prepare('VACUUM INTO ?').run(incoming);
    } finally {
      source.close();
    }
    // The mode the operator gave the database it replaces, if any (a group that reads it, say);
    // and, run as root (sudo) on a service's database, its owner: a root-owned 0600 file is one
    // the service could not open at its next start. (After the copy: a mode without the owner's
    // write, 0440 say, would have refused it.)
    if (existsSync(path)) {
      const { mode, uid, gid } = statSync(path);
      chmodSync(incoming, mode & 0o777);
      if (process.getuid?.() === 0) chownSync(incoming, uid, gid);
    }
    syncToDisk(incoming);
    if (existsSync(path)) {
      // Every commit into the file itself, so that the file kept is the whole database.
      let busy: number;
      try {
        const current = new DatabaseSync(path, { timeout: 5_000 });
        try {
          ({ busy } = current.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy: number });
        } finally {
          current.close();
        }
      } catch (error) {
        throw new Error(`cannot read the database at ${path} to keep it (${(error as Error).message}); nothing was changed. `
          + `If it is damaged, move it aside yourself, with any ${basename(path)}-wal beside it, then restore again`, { cause: error });
      }
      if (busy) throw new Error(`another process is reading or writing ${path} (the CLI?); nothing was changed`);
      keptAs = `${path}.replaced-${now.toISOString().replaceAll(':', '-')}`;
      // A second name for the database, then the backup renamed over it: at no moment is there no
      // database at its path, where a server started (after a crash of this) would make an empty one.
      try {
        linkSync(path, keptAs);
        linked = true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw error;
        renameSync(path, keptAs); // a file system without hard links
      }
    }
    // A log left beside the old file would be replayed into the restored one: gone first (the
    // old file's is empty, checkpointed above).
    for (const suffix of ['-wal', '-shm', '-journal']) rmSync(`${path}${suffix}`, { force: true });
    renameSync(incoming, path); // the database replaced at once, whole
    syncFolderOf(path); // and the renames with it
    return keptAs;
  } catch (error) {
    if (linked && keptAs) rmSync(keptAs, { force: true }); // the database is still at its path
    throw error;
  } finally {
    rmSync(incoming, { force: true }); // (gone already when all went well)
    lock.release();
  }
}

/** The server lock, for a restore: held by a server, the operator is told to stop it (not to move to PostgreSQL). */
function lockForRestore(path: string): SqliteServerLock {
  try {
    return SqliteServerLock.acquire(path);
  } catch (error) {
    if (!isSqliteBusy((error as Error).cause)) throw error;
    throw new Error(`an agent-channel server (or another restore) is running on ${path}: stop it, then restore; nothing was changed`, { cause: error });
  }
}

function existingDatabase(databaseUrl: string): string {
  const path = sqlitePathOf(databaseUrl);
  if (path === ':memory:') throw new Error('DATABASE_URL names a database in memory (sqlite::memory:): there is no file to back up');
  if (!existsSync(path)) throw new Error(`no database at ${resolve(path)} to back up`);
  return path;
}

/** Null when `file` is an intact SQLite database made by agent-channel; else what is wrong with it. */
function whyNotADatabaseOfOurs(file: string): string | null {
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(file, { readOnly: true });
  } catch (error) {
    return (error as Error).message;
  }
  try {
    const check = db.prepare('PRAGMA quick_check').all() as Array<Record<string, unknown>>;
    const verdict = check.map((row) => String(Object.values(row)[0])).join('; ');
    if (verdict !== 'ok') return `SQLite's check says: ${verdict.slice(0, 200)}`;
    const migrated = db.prepare(`select count(*) as n from sqlite_master where type = 'table' and name = 'kysely_migration'`).get() as { n: number };
    if (migrated.n === 0) return 'it has no agent-channel tables';
    return null;
  } catch (error) {
    return (error as Error).message;
  } finally {
    db.close();
  }
}

/** The migrations an agent-channel database file records. */
function migrationsIn(file: string): string[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return db.prepare('select name from kysely_migration').all().map((row) => String(row.name));
  } finally {
    db.close();
  }
}

/** fsync of the folder holding `file`: its entry (a file made or renamed there) on disk too. */
function syncFolderOf(file: string): void {
  // Windows opens no folder as a file; there NTFS' own journal keeps its entries.
  if (process.platform !== 'win32') syncToDisk(dirname(file));
}

/** fsync of a file, or of a folder (its entries: what was renamed in it). */
function syncToDisk(file: string): void {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
