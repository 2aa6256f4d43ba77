import { sql, type Kysely } from 'kysely';
import type { DatabaseSync } from 'node:sqlite';
import type { DB } from './schema.ts';

// The node:sqlite connection of each SQLite store, by the Kysely adapter that its database and
// all of its transactions share.
const connectionByAdapter = new WeakMap<object, DatabaseSync>();

/** Makes `connection` reachable from `db` and its transactions (see sqliteTransactionOpen). */
export function registerSqliteConnection(db: Kysely<DB>, connection: DatabaseSync): void {
  connectionByAdapter.set(db.getExecutor().adapter, connection);
}

/**
 * False when `trx` is a SQLite transaction that SQLite itself has ended: some errors (a full
 * disk, an I/O error, a trigger's RAISE(ROLLBACK)) roll the whole transaction back, not just the
 * failing statement, and then nothing more may run in it as if it were open. Neither Kysely nor
 * SQL can tell: only the connection knows (node:sqlite's `isTransaction`), hence the registry.
 * Always true on PostgreSQL.
 */
export function sqliteTransactionOpen(trx: Kysely<DB>): boolean {
  const connection = connectionByAdapter.get(trx.getExecutor().adapter);
  return connection === undefined || connection.isTransaction;
}

/** Runs one fixed statement that takes no parameters and returns no rows (a savepoint, say). */
export async function runFixedStatement(db: Kysely<DB>, statement: string): Promise<void> {
  await sql.raw(statement).execute(db);
}
