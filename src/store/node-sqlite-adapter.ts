import { openSync, readSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

/** What a request reads on every call and rarely changes: API keys and who may use which agent. */
const ACCOUNT_TABLES = /\b(?:api_keys|agents|memberships|users|workspaces)\b/i;
const READ_ONLY = /^\s*(?:select|pragma|explain)\b/i;
// Writes to columns no cache holds, frequent enough to matter: the once-a-minute last use of a key.
const WRITES_NOTHING_CACHED = /^update "api_keys" set "last_used_at" = \? where "id" = \?$/;

export interface NodeSqliteDatabase extends SqliteDatabase {
  raw: DatabaseSync;
  /**
   * A number that changes whenever the account tables may have changed: by a write of this
   * connection (counted when it runs and again when its transaction ends), or by a commit of any
   * other connection or process (the CLI), seen through `PRAGMA data_version`. Read caches keep
   * it beside what they read and trust their copy only while it is unchanged.
   */
  accountGeneration(): number;
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
  interface Entry { readOnly: boolean; writesAccounts: boolean; statement: SqliteStatement }
  const cache = new Map<string, Entry>();

  const dataVersion = db.prepare('PRAGMA data_version');
  let lastDataVersion = -1;
  let generation = 0;
  let accountWriteInTransaction = false;
  const logIndex = path === ':memory:' ? null : new LogIndexHeader(`${path}-shm`);
  // Whether another process's commits were looked for in the task now running: a request served
  // from the caches asks once per cache (the key, then the agents), and each look is a system
  // call. Everything a task handles arrived before the task began (a request's bytes are read
  // at the start of the callback that handles them), so one look, made within it, serves all of
  // it; the flag drops with the task's microtasks, before the event loop reads anything more.
  let checkedInTask = false;
  const endOfTask = () => { checkedInTask = false; };

  // Each distinct statement once: prepared, classified, and wrapped as Kysely calls it (the
  // wrapper too is made once, not on every run).
  function prepared(sql: string): Entry {
    let entry = cache.get(sql);
    if (!entry) {
      // Take the write lock at BEGIN so a transaction never fails upgrading a read lock
      // while another process (the CLI) writes.
      const stmt = db.prepare(sql === 'begin' ? 'begin immediate' : sql);
      const readOnly = READ_ONLY.test(sql);
      const created: Entry = {
        readOnly,
        // Any statement that may write (`with … insert`, `insert … returning` included) and names
        // an account table; a false alarm only costs a cache refill.
        writesAccounts: !readOnly && ACCOUNT_TABLES.test(sql) && !WRITES_NOTHING_CACHED.test(sql),
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
    accountGeneration() {
      // Asked already in this task: the answer holds for what the task does (see checkedInTask).
      // Not inside a transaction, whose snapshot may be newer than that answer.
      if (db.isTransaction) {
        checkedInTask = false;
      } else if (checkedInTask) {
        return generation;
      } else {
        checkedInTask = true;
        queueMicrotask(endOfTask);
      }
      // No commit anywhere since data_version was last asked: nothing to ask.
      if (logIndex?.readUnchanged()) return generation;
      const version = (dataVersion.get() as { data_version: number }).data_version;
      if (version !== lastDataVersion) {
        lastDataVersion = version;
        generation++;
      }
      // The header as it was before asking: a commit since then changes it, and is asked about
      // next time. Not inside a transaction, whose snapshot may hide a commit the header shows.
      if (!db.isTransaction) logIndex?.confirmLastRead();
      return generation;
    },
    prepare: (sql: string): SqliteStatement => prepared(sql).statement,
  };

  // A write to the account tables moves the generation at once (so no copy read before it is
  // trusted after it), and again once its transaction is over, however it ended (so no copy read
  // while it was open is trusted after a rollback).
  function afterStatement(entry: Entry): void {
    const inTransaction = db.isTransaction;
    // This connection may have seen commits newer than the task's look: the next call looks again.
    checkedInTask = false;
    if (entry.writesAccounts) {
      generation++;
      accountWriteInTransaction = inTransaction;
    } else if (accountWriteInTransaction && !inTransaction) {
      generation++;
      accountWriteInTransaction = false;
    }
    if (!entry.readOnly && !inTransaction) database.onCommit?.();
  }

  return database;
}

/**
 * The write-ahead log's index header, at the start of the `-shm` file that every connection to
 * the database maps: any connection's commit (or a restart of the log) rewrites it. Reading its
 * 48 bytes is one pread; `PRAGMA data_version` takes and releases a lock on the log, several
 * times the cost, and was the largest single cost of a request served from the caches. So
 * data_version is asked only when the header has changed since it was last asked.
 */
class LogIndexHeader {
  // Opened for each connection (a database recreated at the same path is a new file) and never
  // closed: closing any descriptor of a file drops every POSIX lock this process holds on it,
  // SQLite's included, those of other connections and of the checkpointer thread too. So each
  // store opened leaves one descriptor behind until the process exits.
  private fd: number | null = null;
  private readonly lastRead = Buffer.alloc(48);
  private lastReadValid = false;
  /** The header as read just before data_version was last asked (at first all 0xff, which no header is). */
  private readonly confirmed = Buffer.alloc(48, 0xff);
  private readonly path: string;

  constructor(path: string) {
    this.path = path;
    this.readUnchanged();
  }

  /**
   * Reads the header now: true when it is the confirmed one (no commit since). False when it
   * moved, or cannot be read (then every call asks data_version).
   */
  readUnchanged(): boolean {
    try {
      this.fd ??= openSync(this.path, 'r');
      this.lastReadValid = readSync(this.fd, this.lastRead, 0, 48, 0) === 48;
    } catch {
      this.lastReadValid = false;
    }
    return this.lastReadValid && this.lastRead.equals(this.confirmed);
  }

  /** Takes the header of the last read as confirmed: data_version has been asked since it was read. */
  confirmLastRead(): void {
    if (this.lastReadValid) this.lastRead.copy(this.confirmed);
  }
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
