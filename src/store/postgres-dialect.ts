import {
  CompiledQuery, PostgresDialect, PostgresDriver, sql, type DatabaseConnection, type DatabaseIntrospector, type Driver, type Kysely,
  type PostgresDialectConfig, type TableMetadata, type Transaction,
} from 'kysely';
import pg from 'pg';
import { markStoreError } from './unavailable.ts';

/** How agent-channel talks to PostgreSQL, beyond Kysely's own dialect: fewer parses, fewer round trips. */

// Statement texts seen so far, with their name (shared by every connection: a name always means
// one text), or null for a text that runs unnamed (so it is judged once, not on every call).
const statementNames = new Map<string, string | null>();
const MAX_NAMED_STATEMENTS = 2000;
// A result whose columns are "all of the table's" changes shape when a migration (of another
// instance, during a rolling deploy) adds a column, and PostgreSQL then refuses a prepared
// statement's cached plan: such texts run unnamed.
const SHAPE_FOLLOWS_TABLE = /\b(?:select|returning)\s+\*|\.\*/i;
// A named statement PostgreSQL no longer accepts as prepared: its result type changed
// (0A000), or it is gone (26000: pg closed it after a value failed to serialise).
const STALE_STATEMENT = new Set(['0A000', '26000']);
// "Current transaction is aborted, commands ignored until end of transaction block."
const IN_FAILED_TRANSACTION = '25P02';

/** How long PostgreSQL may take to accept a connection (TCP, TLS, authentication) before it is given up on. */
export const POSTGRES_CONNECT_TIMEOUT_MS = 5_000;
/**
 * The longest one statement may run before PostgreSQL cancels it (statement_timeout). Ours take
 * milliseconds in steady use (a lock wait is behind a short transaction); migrations, which may
 * build an index on a large table, are not bound.
 */
export const POSTGRES_STATEMENT_TIMEOUT_MS = 30_000;
/** Past the statement timeout, how much longer a server that has not answered at all is waited for. */
const NO_ANSWER_GRACE_MS = 5_000;

export interface BoundedWaitClientConfig extends pg.ClientConfig {
  /** statement_timeout, and (plus NO_ANSWER_GRACE_MS) how long a statement's answer is waited for; null for none (migrations). */
  statementTimeoutMs?: number | null;
}

/**
 * A pg client that never waits on PostgreSQL for ever. A database that stopped answering (a
 * frozen process, a VM paused, a network that drops packets) still accepts TCP or holds the
 * connection open, and the pg client waits without limit by default: requests, /readyz, the start
 * and the shutdown hung on it. So: connecting gives up after POSTGRES_CONNECT_TIMEOUT_MS; TCP
 * keep-alive notices a peer that vanished from an idle connection; the server cancels a statement
 * past its statement timeout; and a statement whose server has not answered even that cancel a
 * few seconds later takes its connection down with it (its late answer could no longer be told
 * from the next statement's), failing what waits on that connection, which the pool then drops.
 * A statement pipelined behind others is timed from when it was written: its wait includes theirs.
 * Every connection this process opens to PostgreSQL is one of these.
 */
export class BoundedWaitClient extends pg.Client {
  private readonly noAnswerTimeoutMs: number;

  constructor(config: BoundedWaitClientConfig = {}) {
    const { statementTimeoutMs = POSTGRES_STATEMENT_TIMEOUT_MS, ...pgConfig } = config;
    super({
      ...pgConfig,
      connectionTimeoutMillis: POSTGRES_CONNECT_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      ...(statementTimeoutMs === null ? {} : { statement_timeout: statementTimeoutMs }),
    });
    this.noAnswerTimeoutMs = statementTimeoutMs === null ? 0 : statementTimeoutMs + NO_ANSWER_GRACE_MS;
  }

  override query(...args: unknown[]): any {
    const bounded = this.noAnswerTimeoutMs !== 0;
    const timer = bounded ? setTimeout(() => this.giveUp(), this.noAnswerTimeoutMs).unref() : undefined;
    const answered = () => clearTimeout(timer);
    const last = args.length - 1;
    const callback = args[last];
    // Every failure is marked as the store's (see isStoreUnavailable), by whichever way it is told.
    if (typeof callback === 'function') args[last] = (error: unknown, ...results: unknown[]) => { markStoreError(error); answered(); callback(error, ...results); };
    let result: any;
    try {
      result = (super.query as (...a: unknown[]) => unknown)(...args);
    } catch (error) {
      answered();
      markStoreError(error);
      throw error;
    }
    if (typeof result?.then === 'function') {
      return (result as Promise<unknown>).then((value) => { answered(); return value; }, (error: unknown) => { answered(); markStoreError(error); throw error; });
    }
    if (typeof callback !== 'function') answered(); // a submittable (a cursor) reports on its own
    return result;
  }

  private giveUp(): void {
    const stream = (this as unknown as { connection: { stream: { destroy(error: Error): void } } }).connection.stream;
    stream.destroy(new Error(`PostgreSQL did not answer within ${this.noAnswerTimeoutMs / 1000} s: the connection was dropped`));
  }
}

/**
 * A pg client that prepares each distinct parameterised statement once per connection and
 * reuses it: PostgreSQL then parses and plans it once instead of on every call, which was about
 * half its CPU per request. Kysely sends the same text for the same query shape, so the set of
 * texts is small; past MAX_NAMED_STATEMENTS texts seen (a query built with a growing `in (…)` list, say)
 * new texts run unnamed, as pg does by default. A statement PostgreSQL stops accepting fails
 * once and is prepared afresh, under a new name, on its next call. Statements without
 * parameters (begin, commit) stay on the simple protocol, where several statements in one text
 * answer with the last one's result (see NotifyAtCommitDriver).
 *
 * It pipelines: a statement is written at once, not after the answer to the one before, so a
 * statement whose answer nobody waits for (a transaction's BEGIN, a lock: see sendAhead) costs no
 * round trip of its own. PostgreSQL still runs them one after the other, each with its own snapshot.
 */
export class NamedStatementClient extends BoundedWaitClient {
  // Texts this connection prepares under a name of its own, since their shared one went stale here.
  private readonly renamed = new Map<string, string>();
  // The failure that aborted the transaction under way. A statement pipelined behind it fails only
  // with "current transaction is aborted" (25P02), and a COMMIT then answers ROLLBACK: both are
  // given that failure instead, which says what went wrong (a lock past its timeout is an outage).
  private abortedBy: StatementError | null = null;

  constructor(config: BoundedWaitClientConfig = {}) {
    super({ ...config, pipeline: true });
  }

  // Text and values, as Kysely calls it (a promise) or as pg's Pool#query does (a callback).
  override query(...args: unknown[]): any {
    const [text, values, callback] = args;
    const byPromise = args.length === 2;
    const byCallback = args.length === 3 && typeof callback === 'function';
    if (typeof text !== 'string' || !Array.isArray(values) || !(byPromise || byCallback)) {
      return (super.query as (...a: unknown[]) => unknown)(...args);
    }
    if (byCallback) return void this.queryText(text, values, callback as Answer);
    return new Promise((resolve, reject) => this.queryText(text, values, (error, result) => (error ? reject(error) : resolve(result))));
  }

  /**
   * Sends one statement. `answer` is called as its reply is read, so in the order PostgreSQL
   * answered: the transaction's first failure is known before the statements behind it are told.
   */
  private queryText(text: string, values: unknown[], answer: Answer): void {
    if (/^(begin|start transaction)\b/.test(text)) this.abortedBy = null;
    this.send(text, values, (error, result) => {
      if (error) {
        if (error.code === IN_FAILED_TRANSACTION && this.abortedBy !== null) return answer(this.abortedBy);
        this.abortedBy ??= error; // the first failure since BEGIN, or since a rollback to a savepoint
        return answer(error);
      }
      if (/commit$/.test(text) && result?.command === 'ROLLBACK' && this.abortedBy !== null) return answer(this.abortedBy);
      if (/^rollback\b|commit$/.test(text)) this.abortedBy = null; // ended, or back at a savepoint
      answer(null, result);
    });
  }

  private send(text: string, values: unknown[], answer: Answer): void {
    if (values.length === 0) {
      // Several statements in one text answer with one result each: the last one's is the answer.
      super.query(text, values, (error: StatementError | null, result?: pg.QueryResult | pg.QueryResult[]) =>
        answer(error, Array.isArray(result) ? result.at(-1) : result));
      return;
    }
    const name = this.renamed.get(text) ?? statementName(text);
    if (name === undefined) return void super.query(text, values, answer);
    super.query({ name, text, values }, (error: StatementError | null, result?: pg.QueryResult) => {
      if (error?.code !== undefined && STALE_STATEMENT.has(error.code)) this.renamed.set(text, `${name}_${this.renamed.size + 1}`);
      answer(error, result);
    });
  }
}

type StatementError = Error & { code?: string };
type Answer = (error: StatementError | null, result?: pg.QueryResult) => void;

function statementName(text: string): string | undefined {
  let name = statementNames.get(text);
  if (name === undefined && statementNames.size < MAX_NAMED_STATEMENTS) {
    name = SHAPE_FOLLOWS_TABLE.test(text) ? null : `ac${statementNames.size}`;
    statementNames.set(text, name);
  }
  return name ?? undefined;
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

/**
 * Sends a statement whose answer nobody reads (a lock, say) without waiting for it: the
 * transaction's next statement follows it in the same round trip (NamedStatementClient
 * pipelines). If it fails, the transaction is aborted, and the next statement, or the commit,
 * fails with its error.
 */
export async function sendAhead(trx: Transaction<any>, statement: CompiledQuery): Promise<void> {
  // Outside a transaction nothing would wait for its answer before the connection went back to the pool.
  if (!trx.isTransaction) throw new Error('sendAhead runs inside a transaction');
  await trx.getExecutor().provideConnection(async (connection) => {
    connection.executeQuery(statement).catch(() => {}); // told by the statement after it
  });
}

/**
 * Transaction-scoped advisory locks on `keys` (released at its end), taken in one sorted order so
 * that two transactions never wait on each other crosswise, sent ahead of the next statement.
 */
export async function lockKeysAhead(trx: Transaction<any>, keys: readonly string[]): Promise<void> {
  for (const key of [...keys].sort()) await sendAhead(trx, sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.compile(trx));
}

/**
 * Kysely's PostgreSQL driver: BEGIN sent ahead of the transaction's first statement, and the
 * commit carrying the notifications staged by notifyAtCommit.
 */
class NotifyAtCommitDriver extends PostgresDriver {
  // A connection the pool cannot give (refused, timed out) is the store's trouble too.
  override async acquireConnection(): Promise<DatabaseConnection> {
    try {
      return await super.acquireConnection();
    } catch (error) {
      markStoreError(error);
      throw error;
    }
  }

  // How many notifications were staged when each open savepoint began, by connection.
  private readonly stagedAtSavepoint = new WeakMap<DatabaseConnection, Map<string, number>>();

  override async beginTransaction(connection: DatabaseConnection, settings: Parameters<PostgresDriver['beginTransaction']>[1]): Promise<void> {
    this.forget(connection); // nothing left over from a transaction that never ended
    if (settings.isolationLevel || settings.accessMode) return super.beginTransaction(connection, settings);
    // Not waited for: a BEGIN that fails (its connection gone) fails the statement after it too.
    connection.executeQuery(CompiledQuery.raw('begin')).catch(() => {});
  }

  override async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const staged = notificationsAtCommit.get(connection);
    this.forget(connection);
    if (!staged?.length) return super.commitTransaction(connection);
    const { rows } = await connection.executeQuery(CompiledQuery.raw(`${staged.join('; ')}; commit`));
    // As Kysely's own commit: a transaction an earlier error aborted ends with ROLLBACK.
    if ((rows[0] as { command?: string } | undefined)?.command !== 'COMMIT') throw new Error('the transaction was rolled back, not committed');
  }

  override async rollbackTransaction(connection: Parameters<PostgresDriver['rollbackTransaction']>[0]): Promise<void> {
    this.forget(connection);
    await super.rollbackTransaction(connection);
  }

  override async savepoint(connection: DatabaseConnection, name: string, compileQuery: Parameters<PostgresDriver['savepoint']>[2]): Promise<void> {
    let marks = this.stagedAtSavepoint.get(connection);
    if (!marks) this.stagedAtSavepoint.set(connection, (marks = new Map()));
    marks.set(name, notificationsAtCommit.get(connection)?.length ?? 0);
    await super.savepoint(connection, name, compileQuery);
  }

  /** What was staged since the savepoint is dropped with what it did, as PostgreSQL drops a NOTIFY. */
  override async rollbackToSavepoint(connection: DatabaseConnection, name: string, compileQuery: Parameters<PostgresDriver['rollbackToSavepoint']>[2]): Promise<void> {
    const mark = this.stagedAtSavepoint.get(connection)?.get(name);
    if (mark !== undefined) notificationsAtCommit.get(connection)?.splice(mark);
    await super.rollbackToSavepoint(connection, name, compileQuery);
  }

  private forget(connection: DatabaseConnection): void {
    notificationsAtCommit.delete(connection);
    this.stagedAtSavepoint.delete(connection);
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

  constructor(config: PostgresDialectConfig & { pool: pg.Pool }) {
    super(config);
    // NotifyAtCommitDriver reads its commit's result as NamedStatementClient gives it.
    if ((config.pool as unknown as { options: { Client?: unknown } }).options.Client !== NamedStatementClient) {
      throw new Error('the pool must make NamedStatementClient connections');
    }
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
