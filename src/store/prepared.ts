import { CompiledQuery, type Compilable, type Kysely, type QueryResult } from 'kysely';
import type { DB } from './schema.ts';

interface Compiled {
  sql: string;
  slots: Array<{ param: number } | { constant: unknown }>;
}

/**
 * A hot query whose SQL is built once per dialect instead of on every call: Kysely's builder
 * costs more than SQLite takes to run a small indexed query. `build` must not branch on its
 * parameters (they are stand-ins when it runs); the SQL it makes is reused with the real values
 * in their places, and runs through Kysely's executor like any other query. Works on a
 * transaction as on the database itself.
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
    return db.executeQuery<Row>(CompiledQuery.raw(query.sql, values));
  };
  const rows = async (db: Kysely<DB>, ...params: P): Promise<Row[]> => (await run(db, params)).rows;
  /** For statements without `returning`: how many rows they changed. */
  rows.affected = async (db: Kysely<DB>, ...params: P): Promise<number> => Number((await run(db, params)).numAffectedRows ?? 0n);
  return rows;
}
