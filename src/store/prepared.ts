import { CompiledQuery, sql, type Compilable, type Kysely, type QueryResult, type SqliteDatabase } from 'kysely';
import type { DB } from './schema.ts';

// SQLite connections, by the Kysely adapter their database and its transactions share.
const sqliteByAdapter = new WeakMap<object, SqliteDatabase>();

/** Lets prepared statements run inside this SQLite database's transactions without Kysely's driver round. */
export function runPreparedDirectly(db: Kysely<DB>, connection: SqliteDatabase): void {
  sqliteByAdapter.set(db.getExecutor().adapter, connection);
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
    // Inside a transaction the single SQLite connection is ours until it ends, and node:sqlite is
    // synchronous: the statement runs on it at once. Kysely's driver would take the same
    // connection through its lock and several promises, which costs more than the statement.
    const direct = db.isTransaction ? sqliteByAdapter.get(adapter) : undefined;
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
  const direct = db.isTransaction ? sqliteByAdapter.get(db.getExecutor().adapter) : undefined;
  if (direct) {
    direct.prepare(statement).run([]);
    return;
  }
  await sql.raw(statement).execute(db);
}
