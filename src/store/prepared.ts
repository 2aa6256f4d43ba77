import { CompiledQuery, ControlledTransaction, sql, type Compilable, type Kysely, type QueryResult } from 'kysely';
import type { NodeSqliteDatabase } from './node-sqlite-adapter.ts';
import type { DB } from './schema.ts';

// SQLite connections, by the Kysely adapter their database and its transactions share.
const sqliteByAdapter = new WeakMap<object, NodeSqliteDatabase>();

/** Lets prepared statements run inside this SQLite database's transactions without Kysely's driver round. */
export function runPreparedDirectly(db: Kysely<DB>, connection: NodeSqliteDatabase): void {
  sqliteByAdapter.set(db.getExecutor().adapter, connection);
}

/**
 * The SQLite connection to run on directly, when `db` is a transaction that is still open:
 * node:sqlite is synchronous and an open transaction owns the single connection until it ends.
 * Anything else (no transaction, PostgreSQL, a transaction already over) goes through Kysely,
 * which waits for the connection or refuses a finished transaction as it always did.
 */
function openSqliteTransaction(db: Kysely<DB>): NodeSqliteDatabase | undefined {
  if (!db.isTransaction) return undefined;
  const direct = sqliteByAdapter.get(db.getExecutor().adapter);
  if (!direct?.raw.isTransaction) return undefined;
  if (db instanceof ControlledTransaction && (db.isCommitted || db.isRolledBack)) return undefined;
  return direct;
}

/**
 * False when `trx` is a SQLite transaction that SQLite itself has ended: some errors (a full
 * disk, an I/O error, a trigger's RAISE(ROLLBACK)) roll the whole transaction back, not just the
 * failing statement, and then nothing more may run in it as if it were open.
 */
export function sqliteTransactionOpen(trx: Kysely<DB>): boolean {
  const connection = sqliteByAdapter.get(trx.getExecutor().adapter);
  return connection === undefined || connection.raw.isTransaction;
}

interface Compiled {
  sql: string;
  slots: Array<{ param: number } | { constant: unknown }>;
}

/**
 * A hot query whose SQL is built once per dialect instead of on every call: Kysely's builder
 * costs about twice what SQLite takes to run a small indexed query. `build` must not branch on
 * its parameters (they are stand-ins when it runs); the SQL it makes is reused with the real
 * values in their places. Works on a transaction as on the database itself.
 */
export function prepared<P extends unknown[], Row>(build: (db: Kysely<DB>, ...params: P) => Compilable<Row>) {
  // Keyed by the dialect's adapter, which a database and all its transactions share.
  const compiled = new WeakMap<object, Compiled>();
  const run = async (db: Kysely<DB>, params: P): Promise<QueryResult<Row>> => {
    const adapter = db.getExecutor().adapter;
    let query = compiled.get(adapter);
    if (!query) {
      const standIns = params.map((_, i) => `\u0000prepared-parameter-${i}\u0000`) as unknown as P;
      const { sql, parameters } = build(db, ...standIns).compile();
      const slots = parameters.map((value) => {
        const index = (standIns as unknown[]).indexOf(value);
        return index >= 0 ? { param: index } : { constant: value };
      });
      query = { sql, slots };
      compiled.set(adapter, query);
    }
    const values = query.slots.map((slot) => ('param' in slot ? params[slot.param] : slot.constant));
    // Kysely's driver would take the same connection through its lock and several promises,
    // which costs more than the statement.
    const direct = openSqliteTransaction(db);
    if (direct) {
      const statement = direct.prepare(query.sql);
      if (statement.reader) return { rows: statement.all(values) as Row[] };
      const { changes } = statement.run(values);
      return { rows: [], numAffectedRows: BigInt(changes) };
    }
    return db.executeQuery<Row>(CompiledQuery.raw(query.sql, values));
  };
  const rows = async (db: Kysely<DB>, ...params: P): Promise<Row[]> => (await run(db, params)).rows;
  /** For statements without `returning`: how many rows they changed. */
  rows.affected = async (db: Kysely<DB>, ...params: P): Promise<number> => Number((await run(db, params)).numAffectedRows ?? 0n);
  return rows;
}

/**
 * Runs one fixed statement that takes no parameters and returns no rows (a savepoint, say),
 * straight on the SQLite connection inside a transaction, like prepared statements do.
 */
export async function runFixedStatement(db: Kysely<DB>, statement: string): Promise<void> {
  const direct = openSqliteTransaction(db);
  if (direct) {
    direct.prepare(statement).run([]);
    return;
  }
  await sql.raw(statement).execute(db);
}
