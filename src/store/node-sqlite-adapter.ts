import { DatabaseSync, type StatementSync } from 'node:sqlite';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

/**
 * Lets Kysely's own SqliteDialect drive Node's built-in `node:sqlite`.
 * (better-sqlite3 is a native addon; here it could only be built against the system Node's
 * headers, not the pinned Node 24's, so the built-in driver is the dependable choice.)
 */
export function openNodeSqlite(path: string): SqliteDatabase & { raw: DatabaseSync } {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA foreign_keys = ON');
  db.exec('PRAGMA busy_timeout = 5000'); // the CLI may write while the server runs
  const cache = new Map<string, { stmt: StatementSync; reader: boolean }>();

  function prepared(sql: string) {
    let entry = cache.get(sql);
    if (!entry) {
      // Take the write lock at BEGIN so a transaction never fails upgrading a read lock
      // while another process (the CLI) writes.
      const stmt = db.prepare(sql === 'begin' ? 'begin immediate' : sql);
      entry = { stmt, reader: stmt.columns().length > 0 };
      if (cache.size > 1000) cache.clear();
      cache.set(sql, entry);
    }
    return entry;
  }

  return {
    raw: db,
    close: () => db.close(),
    prepare(sql: string): SqliteStatement {
      const { stmt, reader } = prepared(sql);
      return {
        reader,
        all: (params) => stmt.all(...bindable(params)),
        run: (params) => {
          const result = stmt.run(...bindable(params));
          return { changes: result.changes, lastInsertRowid: result.lastInsertRowid };
        },
        iterate: (params) => stmt.iterate(...bindable(params)) as IterableIterator<unknown>,
      };
    },
  };
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
