import { realpathSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { isSqliteBusy } from './node-sqlite-adapter.ts';
import { makePrivateFile } from './private-files.ts';

/**
 * One server per SQLite file. At start a server treats every job marked running as cut off by a
 * crash and runs it again (there is nobody else to finish it), so a second server on the same
 * file would run the first one's turns a second time. The server therefore holds SQLite's
 * exclusive lock on a small file beside the database (`<database>.lock`, empty) for as long as
 * it runs: an open `BEGIN EXCLUSIVE` that is never committed. The operating system drops the lock
 * when the process ends, however it ends (SIGKILL too), so a crashed server never blocks the
 * next one. The CLI does not take it: it may write beside a running server. The lock is named
 * after the database's real path, so that a second server reaching the same file by another name
 * (a symbolic link to it or to a folder above it) is refused too.
 */
export class SqliteServerLock {
  private readonly connection: DatabaseSync;

  private constructor(connection: DatabaseSync) {
    this.connection = connection;
  }

  static acquire(databasePath: string): SqliteServerLock {
    const lockFile = `${realPathOf(databasePath)}.lock`;
    // Not SQLite's 0644: a local user who could read it could hold a shared lock on it, and keep
    // every server from starting (its -journal takes its mode).
    let connection: DatabaseSync;
    try {
      makePrivateFile(lockFile);
      connection = new DatabaseSync(lockFile, { timeout: 0 });
    } catch (error) {
      // Alone, "EACCES: permission denied, open '….lock'" said neither what the file is nor why it is needed.
      throw new Error(`cannot lock the SQLite database ${databasePath}: ${(error as Error).message} (a server keeps `
        + `${basename(lockFile)} beside the database, in a folder it may write to, as SQLite's -wal and -shm)`, { cause: error });
    }
    try {
      connection.exec('BEGIN EXCLUSIVE');
    } catch (error) {
      connection.close();
      if (isSqliteBusy(error)) {
        throw new Error(`another agent-channel server is using the SQLite database ${databasePath}`
          + ' (one server per SQLite file; several instances share a PostgreSQL database instead)', { cause: error });
      }
      throw error;
    }
    return new SqliteServerLock(connection);
  }

  release(): void {
    if (this.connection.isOpen) this.connection.close();
  }
}

/** The file's path with every symbolic link resolved; for a file not made yet, its folder's real path and its name. */
export function realPathOf(path: string): string {
  try {
    return realpathSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    return join(realpathSync(dirname(path)), basename(path));
  }
}
