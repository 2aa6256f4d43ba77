import {
  CompiledQuery, PostgresDialect, PostgresDriver, sql, type DatabaseConnection, type DatabaseIntrospector, type Driver, type Kysely,
  type PostgresDialectConfig, type TableMetadata, type Transaction,
} from 'kysely';
import pg from 'pg';

/** How agent-channel talks to PostgreSQL, beyond Kysely's own dialect: fewer parses, fewer round trips. */

// Statement texts given a name so far (shared by every connection: a name always means one text).
const statementNames = new Map<string, string>();
const MAX_NAMED_STATEMENTS = 2000;

/**
 * A pg client that prepares each distinct parameterised statement once per connection and
 * reuses it: PostgreSQL then parses and plans it once instead of on every call, which was about
 * half its CPU per request. Kysely sends the same text for the same query shape, so the set of
 * texts is small; past MAX_NAMED_STATEMENTS (a query built with a growing `in (…)` list, say)
 * new texts run unnamed, as pg does by default. Statements without parameters (begin, commit)
 * stay on the simple protocol, where several statements in one text answer with the last one's
 * result (see NotifyAtCommitDriver).
 */
export class NamedStatementClient extends pg.Client {
  override query(...args: unknown[]): any {
    const [text, values] = args;
    if (typeof text === 'string' && Array.isArray(values) && args.length === 2) {
      if (values.length === 0) {
        return (super.query(text, values) as unknown as Promise<pg.QueryResult | pg.QueryResult[]>)
          .then((result) => (Array.isArray(result) ? result.at(-1) : result));
      }
      let name = statementNames.get(text);
      if (name === undefined && statementNames.size < MAX_NAMED_STATEMENTS) {
        name = `ac${statementNames.size}`;
        statementNames.set(text, name);
      }
      if (name !== undefined) return super.query({ name, text, values });
    }
    return (super.query as (...a: unknown[]) => unknown)(...args);
  }
}

// NOTIFY statements staged in a transaction, by the connection it runs on, until it ends.
const notificationsAtCommit = new WeakMap<DatabaseConnection, string[]>();

/**
 * Sends `pg_notify(channel, payload)` with the transaction's COMMIT, in the same message: one
 * round trip less than a statement of its own. PostgreSQL delivers a transaction's
 * notifications at its commit anyway, and never after a rollback; a notification that fails
 * fails the commit, as it would have failed the transaction before.
 */
export async function notifyAtCommit(trx: Transaction<any>, channel: string, payload: string): Promise<void> {
  const statement = `select pg_notify(${pg.escapeLiteral(channel)}, ${pg.escapeLiteral(payload)})`;
  await trx.getExecutor().provideConnection(async (connection) => {
    let staged = notificationsAtCommit.get(connection);
    if (!staged) notificationsAtCommit.set(connection, (staged = []));
    staged.push(statement);
  });
}

/** Kysely's PostgreSQL driver, committing with the notifications staged by notifyAtCommit. */
class NotifyAtCommitDriver extends PostgresDriver {
  override async beginTransaction(connection: DatabaseConnection, settings: Parameters<PostgresDriver['beginTransaction']>[1]): Promise<void> {
    notificationsAtCommit.delete(connection); // nothing left over from a transaction that never ended
    await super.beginTransaction(connection, settings);
  }

  override async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const staged = notificationsAtCommit.get(connection);
    notificationsAtCommit.delete(connection);
    if (!staged?.length) return super.commitTransaction(connection);
    const { rows } = await connection.executeQuery(CompiledQuery.raw(`${staged.join('; ')}; commit`));
    // As Kysely's own commit: a transaction an earlier error aborted ends with ROLLBACK.
    if ((rows[0] as { command?: string } | undefined)?.command !== 'COMMIT') throw new Error('the transaction was rolled back, not committed');
  }

  override async rollbackTransaction(connection: Parameters<PostgresDriver['rollbackTransaction']>[0]): Promise<void> {
    notificationsAtCommit.delete(connection);
    await super.rollbackTransaction(connection);
  }
}

/**
 * Our PostgreSQL dialect: NotifyAtCommitDriver, and an introspector of our schema only. Kysely's
 * own introspector reads the catalog of every schema, column by column with
 * pg_get_serial_sequence(); a table that another process alters or drops at that moment (a
 * parallel test run, another app in the database) makes that query fail although our schema is
 * fine. The migrator only needs to know which tables exist.
 */
export class CurrentSchemaPostgresDialect extends PostgresDialect {
  private readonly config: PostgresDialectConfig;

  constructor(config: PostgresDialectConfig) {
    super(config);
    this.config = config;
  }

  override createDriver(): Driver {
    return new NotifyAtCommitDriver(this.config);
  }

  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return {
      async getSchemas() {
        const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace`.execute(db);
        return rows;
      },
      async getTables(): Promise<TableMetadata[]> {
        const { rows } = await sql<{ name: string; schema: string; is_view: boolean }>`
          select c.relname as name, n.nspname as schema, c.relkind = 'v' as is_view
          from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
          where n.nspname = current_schema() and c.relkind in ('r', 'p', 'v')`.execute(db);
        return rows.map((row) => ({ name: row.name, schema: row.schema, isView: row.is_view, isForeign: false, columns: [] }));
      },
    };
  }
}
