import { DatabaseSync } from 'node:sqlite';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

// Statements that cannot commit anything: no checkpoint is due after them.
const READ_ONLY = /^\s*(?:select|pragma|explain)\b/i;

export interface NodeSqliteDatabase extends SqliteDatabase {
  raw: DatabaseSync;
  /**
   * SQLite's `PRAGMA data_version` on this connection: it moves when any other connection, of
   * this process or another (the operator CLI), has committed since it was last asked, and never
   * for this connection's own commits. Asked on the connection itself rather than through Kysely:
   * it reads no table, and must not wait behind a transaction of ours in progress.
   */
  dataVersion(): number;
  /** Called after each statement that may have committed a change (the checkpointer listens). */
  onCommit: (() => void) | null;
}

/**
 * How a commit reaches the disk. `full`: the log is synced at every commit, so what a client was
 * told was accepted survives a power cut or an OS crash too (a grouped commit shares one sync
 * among all of its requests). `normal`: synced only at checkpoints; faster, and safe against a
 * crash of this process, but the last commits may be lost with the machine.
 */
export type SqliteSynchronous = 'full' | 'normal';
export const SQLITE_SYNCHRONOUS_MODES: readonly SqliteSynchronous[] = ['full', 'normal'];

const BUSY_TIMEOUT_MS = 5000;

// The SQL of every distinct statement any connection of this process has prepared (noted once, at
// its first preparation): a test reads their query plans, so that a statement that stops using an
// index, and reads a table that only grows, fails a test rather than a server months later.
const statementsSeen = new Set<string>();
const MAX_STATEMENTS_SEEN = 5000;

export function sqliteStatementsSeen(): ReadonlySet<string> {
  return statementsSeen;
}

/** SQLITE_BUSY, plain or extended (the low byte is the primary code). */
export const isSqliteBusy = (error: unknown): boolean => ((error as { errcode?: number }).errcode ?? 0) % 256 === 5;

/**
 * Two processes switching a new file to WAL at the same moment can each hold a shared lock and
 * want the exclusive one: SQLite then answers one of them BUSY at once, without waiting (its
 * busy handler would deadlock). That one's statement has ended, and its lock with it, so the
 * other goes through; the loser tries again a few milliseconds later (seen: 1 open in about 120
 * failing, when four processes opened a new file together).
 */
function switchToWal(db: DatabaseSync): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (const deadline = Date.now() + BUSY_TIMEOUT_MS; ;) {
    try {
      const { journal_mode: mode } = db.prepare('PRAGMA journal_mode = WAL').get() as { journal_mode: string };
      if (mode !== 'wal' && mode !== 'memory') throw new Error(`SQLite could not switch the file to WAL (journal mode: ${mode})`);
      return;
    } catch (error) {
      if (!isSqliteBusy(error) || Date.now() > deadline) throw error;
      Atomics.wait(pause, 0, 0, 2 + Math.random() * 8); // a synchronous sleep: opening is synchronous
    }
  }
}

/**
 * Lets Kysely's own SqliteDialect drive Node's built-in `node:sqlite`.
 * (better-sqlite3 is a native addon; here it could only be built against the system Node's
 * headers, not the pinned Node 24's, so the built-in driver is the dependable choice.)
 */
export function openNodeSqlite(path: string, synchronous: SqliteSynchronous = 'full'): NodeSqliteDatabase {
  const db = new DatabaseSync(path);
  // First: the CLI may write while the server runs, and both may open a new file at the same
  // moment, when switching it to WAL needs a lock the other may hold for a few milliseconds.
  db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  switchToWal(db);
  db.exec(`PRAGMA synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  db.exec('PRAGMA foreign_keys = ON');
  // When a unit of a batch fails, the engine runs the batch again with each unit in a savepoint;
  // SQLite keeps the pages a savepoint may have to restore in a sub-journal, which past 64 KiB
  // spills to a temporary file (it took three quarters of a busy server's writes when every
  // unit had a savepoint). Kept in memory instead (a batch's worth of pages).
  db.exec('PRAGMA temp_store = MEMORY');
  interface Entry { readOnly: boolean; statement: SqliteStatement }
  const cache = new Map<string, Entry>();
  const dataVersion = db.prepare('PRAGMA data_version');

  // Each distinct statement once: prepared, classified, and wrapped as Kysely calls it (the
  // wrapper too is made once, not on every run).
  function prepared(sql: string): Entry {
    let entry = cache.get(sql);
    if (!entry) {
      // Take the write lock at BEGIN so a transaction never fails upgrading a read lock
      // while another process (the CLI) writes.
      const stmt = db.prepare(sql === 'begin' ? 'begin immediate' : sql);
      const created: Entry = {
        readOnly: READ_ONLY.test(sql),
        statement: {
          reader: stmt.columns().length > 0,
          all: (params) => {
            const rows = stmt.all(...bindable(params));
            afterStatement(created); // `insert … returning` comes through here
            return rows;
          },
          run: (params) => {
            const result = stmt.run(...bindable(params));
            afterStatement(created);
            return { changes: result.changes, lastInsertRowid: result.lastInsertRowid };
          },
          iterate: (params) => stmt.iterate(...bindable(params)) as IterableIterator<unknown>,
        },
      };
      if (cache.size > 1000) cache.clear();
      cache.set(sql, (entry = created));
      if (statementsSeen.size < MAX_STATEMENTS_SEEN) statementsSeen.add(sql);
    }
    return entry;
  }

  const database: NodeSqliteDatabase = {
    raw: db,
    onCommit: null,
    close: () => db.close(),
    dataVersion: () => (dataVersion.get() as { data_version: number }).data_version,
    prepare: (sql: string): SqliteStatement => prepared(sql).statement,
  };

  function afterStatement(entry: Entry): void {
    if (!entry.readOnly && !db.isTransaction) database.onCommit?.();
  }

  return database;
}

type Bindable = null | number | bigint | string | Uint8Array;

function bindable(params: ReadonlyArray<unknown>): Bindable[] {
  return params.map((value) => {
    if (value === undefined) return null;
    if (typeof value === 'boolean') return value ? 1 : 0;
    if (value instanceof Date) return value.toISOString();
    return value as Bindable;
  });
}
