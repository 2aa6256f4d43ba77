import { dirname, resolve } from 'node:path';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { Migrator, type Migration } from 'kysely/migration';
import pg from 'pg';
import type { Dialect } from './dialect.ts';
import type { DB } from './schema.ts';
import { openNodeSqlite, type SqliteSynchronous } from './node-sqlite-adapter.ts';
import {
  BoundedWaitClient, CurrentSchemaPostgresDialect, NamedStatementClient, POSTGRES_CONNECT_TIMEOUT_MS, POSTGRES_STATEMENT_TIMEOUT_MS,
  type BoundedWaitClientConfig,
} from './postgres-dialect.ts';
import { registerSqliteConnection } from './sqlite-transaction.ts';
import { DatabaseAnchoredClock, systemClock, type SharedClock } from './shared-clock.ts';
import { SqliteCheckpointer } from './sqlite-checkpointer.ts';
import { makeFolder, makePrivateFile } from './private-files.ts';
import { SqliteServerLock } from './sqlite-server-lock.ts';
import { shownUrl } from '../domain/shown-url.ts';
import * as m001 from './migrations/001_initial.ts';
import * as m002RateLimits from './migrations/002_rate_limits.ts';
import * as m003InstanceSecrets from './migrations/003_instance_secrets.ts';
import * as m004HistoryIndexes from './migrations/004_history_indexes.ts';
import * as m005JobsLine from './migrations/005_jobs_line.ts';
import * as m006MissionsOwner from './migrations/006_missions_owner.ts';
import * as m007MembershipsRole from './migrations/007_memberships_role.ts';
import * as m008LoginAttempts from './migrations/008_login_attempts.ts';
import * as m009Events from './migrations/009_events.ts';
import * as m010Webhooks from './migrations/010_webhooks.ts';
import * as m011Telegram from './migrations/011_telegram.ts';
import * as m012WebhookDeliveriesPurge from './migrations/012_webhook_deliveries_purge.ts';

/** The Store port: one Kysely handle over SQLite or PostgreSQL, migrated on open. */
export interface Store {
  readonly db: Kysely<DB>;
  readonly dialect: Dialect;
  /** PostgreSQL only: the pool, for LISTEN/NOTIFY clients. */
  readonly pgPool: pg.Pool | null;
  /** PostgreSQL only: the schema this store lives in (tests use one per run). */
  readonly pgSchema: string | null;
  /**
   * SQLite only: a number that moves whenever another connection (the operator CLI, say) has
   * committed since it was last asked; this store's own commits leave it as it is (see
   * NodeSqliteDatabase.dataVersion). Null on PostgreSQL, which has no such cheap look.
   */
  readonly dataVersion: (() => number) | null;
  /** The time every instance on this store agrees on (see SharedClock): for leases and windows that instances compare. */
  readonly clock: SharedClock;
  /** SQLite only: copies the write-ahead log into the database off the event loop (the server does; the CLI does not). */
  startBackgroundCheckpoints(onError?: (error: unknown) => void): void;
  /** PostgreSQL only: measures the shared clock's offset again every 30 s (the server does; the CLI does not). */
  startClockSync(onError?: (error: unknown) => void): void;
  /**
   * SQLite only: claims the file for this process's server until close(), or throws if another
   * server holds it (see SqliteServerLock). Safe to call again. A no-op on PostgreSQL, which
   * takes several instances.
   */
  claimForServer(): void;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export const DEFAULT_DATABASE_URL = 'sqlite:./data/agent-channel.db';

export interface OpenStoreOptions {
  /** PostgreSQL: use (and create) this schema instead of `public`. */
  pgSchema?: string;
  pgPoolSize?: number;
  /** PostgreSQL: the longest one statement may run (see BoundedWaitClient); POSTGRES_STATEMENT_TIMEOUT_MS unless set. */
  pgStatementTimeoutMs?: number;
  /** SQLite: when commits are synced to disk (see SqliteSynchronous); `full` unless set. */
  sqliteSynchronous?: SqliteSynchronous;
  /**
   * SQLite: the server's store, which claims the file (Store.claimForServer) before it opens,
   * let alone migrates, it: a server refused for another one's (or a restore's) lock leaves no trace.
   */
  forServer?: boolean;
}

/** How often an instance on PostgreSQL measures its clock's offset from the database server's again. */
const CLOCK_SYNC_EVERY_MS = 30_000;

// bigint columns (ids of turns and jobs) come back as numbers; they stay far below 2^53.
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/** Does this DATABASE_URL name a PostgreSQL database (else it is SQLite's)? */
export const isPostgresUrl = (url: string): boolean => url.startsWith('postgres://') || url.startsWith('postgresql://');

export async function openStore(url: string = DEFAULT_DATABASE_URL, options: OpenStoreOptions = {}): Promise<Store> {
  const store = isPostgresUrl(url)
    ? await openPostgres(url, options)
    : openSqlite(url, options.sqliteSynchronous, options.forServer ?? false);
  try {
    if (store.dialect === 'postgres') {
      // On a connection of its own without the statement timeout: a migration may build an index
      // on a large table, or wait for another instance's migration, for longer than any request may.
      const migrations = postgresKysely(postgresPool({ ...postgresConnection(url, store.pgSchema, null), max: 1 }));
      try {
        await migrate(store.dialect, migrations);
      } finally {
        await migrations.destroy();
      }
    } else {
      await migrate(store.dialect, store.db);
    }
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

/** The file a `sqlite:` DATABASE_URL names (`:memory:` for none); any other URL is refused with the reason. */
export function sqlitePathOf(url: string): string {
  if (!url.startsWith('sqlite:')) {
    // Only the scheme is echoed (what follows may hold a password); a bare path has none to hide.
    const got = url.includes(':') ? `"${url.split(':')[0]}:…"` : `"${url}"; a SQLite file is written sqlite:${url}`;
    throw new Error(`DATABASE_URL must start with sqlite: or postgres:// (got ${got})`);
  }
  const path = url.slice('sqlite:'.length) || DEFAULT_DATABASE_URL.slice('sqlite:'.length);
  // `sqlite://./data/x.db` would be the path //./data/x.db, that is /data/x.db: a database made
  // from the root, whatever was meant. Only sqlite:<path>, or sqlite:///<absolute path>, is taken.
  if (path.startsWith('//') && !path.startsWith('///')) {
    throw new Error(`DATABASE_URL must be sqlite:<path>, such as sqlite:./data/agent-channel.db or sqlite:/var/lib/agent-channel.db (got "${url}": `
      + `after sqlite:// it would be read as a path from the root, ${resolve(path)})`);
  }
  return path;
}

function openSqlite(url: string, synchronous: SqliteSynchronous | undefined, forServer: boolean): Store {
  const path = sqlitePathOf(url);
  const cannotOpen = (error: unknown) => new Error(`cannot open the SQLite database ${resolve(path)}: ${(error as Error).message}`, { cause: error });
  try {
    if (path !== ':memory:') makeFolder(dirname(resolve(path)));
  } catch (error) {
    throw cannotOpen(error);
  }
  let serverLock = forServer && path !== ':memory:' ? SqliteServerLock.acquire(resolve(path)) : null;
  let database;
  try {
    // SQLite would make it readable by all (0644 less the umask); its -wal and -shm take its mode.
    if (path !== ':memory:') makePrivateFile(path);
    database = openNodeSqlite(path, synchronous);
  } catch (error) {
    serverLock?.release();
    throw cannotOpen(error);
  }
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database }) });
  registerSqliteConnection(db, database.raw);
  let checkpointer: SqliteCheckpointer | null = null;
  return {
    db,
    dialect: 'sqlite',
    clock: systemClock,
    pgPool: null,
    pgSchema: null,
    dataVersion: database.dataVersion,
    startClockSync() {},
    startBackgroundCheckpoints(onError) {
      if (checkpointer || path === ':memory:') return;
      const started = new SqliteCheckpointer(resolve(path), onError);
      database.onCommit = () => started.committed();
      checkpointer = started;
    },
    claimForServer() {
      if (!serverLock && path !== ':memory:') serverLock = SqliteServerLock.acquire(resolve(path));
    },
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: async () => {
      database.onCommit = null;
      await checkpointer?.stop();
      await db.destroy();
      serverLock?.release();
    },
  };
}

/** `?schema=name` on a postgres URL selects (and creates) a schema other than public. */
export function splitSchemaParam(url: string): { url: string; schema: string | null } {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema');
  parsed.searchParams.delete('schema');
  return { url: parsed.toString(), schema };
}

/**
 * PostgreSQL out of reach at start, said with the setting to look at: pg's own words
 * ("connect ECONNREFUSED 127.0.0.1:1", `role "x" does not exist`) do not name it. The URL is
 * shown without its secrets (shownUrl).
 */
export function cannotConnectToPostgres(databaseUrl: string, error: unknown): Error {
  return new Error(`cannot connect to the PostgreSQL database at DATABASE_URL ${shownUrl(databaseUrl)}: ${(error as Error).message}`, { cause: error });
}

async function openPostgres(rawUrl: string, options: OpenStoreOptions): Promise<Store> {
  const { url, schema: schemaParam } = splitSchemaParam(rawUrl);
  const schema = options.pgSchema ?? schemaParam;
  if (schema !== null && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(`DATABASE_URL's ?schema= must be 1–63 lowercase letters, digits and underscores, not starting with a digit (got ${JSON.stringify(schema.slice(0, 80))})`);
  }
  if (schema) {
    const admin = new BoundedWaitClient({ connectionString: url });
    await admin.connect().catch((error: unknown) => { throw cannotConnectToPostgres(rawUrl, error); });
    try {
      await admin.query(`create schema if not exists ${schema}`);
    } finally {
      await admin.end();
    }
  }
  const statementTimeoutMs = options.pgStatementTimeoutMs ?? POSTGRES_STATEMENT_TIMEOUT_MS;
  const pool = postgresPool({
    ...postgresConnection(rawUrl, schema, statementTimeoutMs),
    max: options.pgPoolSize ?? 10,
    // Waiting for a free connection: never this long but when the server stopped answering (the
    // connections in use are then dropped within this time, and new ones cannot be made).
    connectionTimeoutMillis: statementTimeoutMs + POSTGRES_CONNECT_TIMEOUT_MS,
  });
  const db = postgresKysely(pool);
  const clock = new DatabaseAnchoredClock(async () => {
    const client = await pool.connect();
    return {
      readMs: async () => Number((await client.query<{ ms: number }>('select extract(epoch from clock_timestamp())::float8 * 1000 as ms')).rows[0]!.ms),
      release: () => client.release(),
    };
  });
  try {
    await clock.sync(); // the pool's first connection
  } catch (error) {
    await db.destroy();
    throw cannotConnectToPostgres(rawUrl, error);
  }
  let clockSync: NodeJS.Timeout | null = null;
  return {
    db,
    dialect: 'postgres',
    clock,
    pgPool: pool,
    pgSchema: schema,
    dataVersion: null,
    startBackgroundCheckpoints() {},
    startClockSync(onError) {
      // A failed measurement keeps the offset of the last one.
      clockSync ??= setInterval(() => clock.sync().catch((error) => onError?.(error)), CLOCK_SYNC_EVERY_MS).unref();
    },
    claimForServer() {},
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: () => {
      if (clockSync) clearInterval(clockSync);
      return db.destroy();
    },
  };
}

/** What every pooled connection of ours to this PostgreSQL database is made with (see BoundedWaitClient for the bounds). */
function postgresConnection(rawUrl: string, schema: string | null, statementTimeoutMs?: number | null): pg.PoolConfig & BoundedWaitClientConfig {
  return {
    connectionString: splitSchemaParam(rawUrl).url,
    types: pgTypes,
    statementTimeoutMs,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  };
}

/** A pool of our connections (NamedStatementClient), none of whose failures can end the process. */
function postgresPool(config: pg.PoolConfig & BoundedWaitClientConfig): pg.Pool {
  const pool = new pg.Pool({ Client: NamedStatementClient, ...config });
  pool.on('error', () => {}); // an idle client dropped by the server is replaced on next use
  // A client in use is one the pool stops watching: if the server drops it between two statements
  // (a restart, a failover), pg's 'error' event would find no listener and end the process. The
  // statement under way or the next one fails instead, and the pool discards the client.
  pool.on('connect', (client) => { client.on('error', () => {}); });
  return pool;
}

const postgresKysely = (pool: pg.Pool): Kysely<DB> => new Kysely<DB>({ dialect: new CurrentSchemaPostgresDialect({ pool }) });

/** Every migration of this release by name, in the order they apply (names sort in that order). */
export function migrationsFor(dialect: Dialect): Record<string, Migration> {
  return {
    '001_initial': { up: (db) => m001.up(db, dialect) },
    '002_rate_limits': { up: (db) => m002RateLimits.up(db, dialect) },
    '003_instance_secrets': { up: (db) => m003InstanceSecrets.up(db) },
    '004_history_indexes': { up: (db) => m004HistoryIndexes.up(db) },
    '005_jobs_line': { up: (db) => m005JobsLine.up(db) },
    '006_missions_owner': { up: (db) => m006MissionsOwner.up(db) },
    '007_memberships_role': { up: (db) => m007MembershipsRole.up(db) },
    '008_login_attempts': { up: (db) => m008LoginAttempts.up(db) },
    '009_events': { up: (db) => m009Events.up(db, dialect) },
    '010_webhooks': { up: (db) => m010Webhooks.up(db, dialect) },
    '011_telegram': { up: (db) => m011Telegram.up(db, dialect) },
    '012_webhook_deliveries_purge': { up: (db) => m012WebhookDeliveriesPurge.up(db) },
  };
}

async function migrate(dialect: Dialect, db: Kysely<DB>): Promise<void> {
  const all = migrationsFor(dialect);
  const migrator = new Migrator({ db, provider: { getMigrations: async () => all } });
  // Kysely locks migrations on PostgreSQL but not on SQLite, where it assumes one connection.
  // Yet the server and the CLI may open a new file at the same moment: under one write lock, the
  // second waits for the first to finish, then finds nothing left to do (instead of creating
  // tables that now exist). SQLite runs DDL in a transaction, so a failed migration leaves nothing.
  const sqlite = dialect === 'sqlite';
  if (sqlite) await sql`begin immediate`.execute(db);
  try {
    // Before Kysely looks: it would call a database that a newer release migrated "corrupted".
    await refuseMigrationsUnknownHere(dialect, db, Object.keys(all));
    const { error } = await migrator.migrateToLatest();
    if (error) {
      // (On PostgreSQL a newer instance may have migrated meanwhile: say so rather than Kysely.)
      await refuseMigrationsUnknownHere(dialect, db, Object.keys(all));
      throw error instanceof Error ? error : new Error(String(error));
    }
  } catch (error) {
    if (sqlite) await sql`rollback`.execute(db).catch(() => {}); // (SQLite may have rolled back itself)
    throw error;
  }
  if (sqlite) await sql`commit`.execute(db);
}

/**
 * Refuses a database that records migrations this release does not have: one migrated by a newer
 * release (an operator rolling back), or by some other build. This release cannot know what they
 * changed, so it neither runs on it nor touches it; the operator is told what to do instead.
 */
async function refuseMigrationsUnknownHere(dialect: Dialect, db: Kysely<DB>, known: string[]): Promise<void> {
  const table = dialect === 'sqlite'
    ? await sql`select 1 from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(db)
    : await sql`select 1 from pg_tables where schemaname = current_schema() and tablename = 'kysely_migration'`.execute(db);
  if (table.rows.length === 0) return; // a new database
  const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
  const why = whyMigrationsUnknownHere(rows.map((row) => row.name), known);
  if (why) throw new Error(why);
}

/** Why this release may not open a database that records the migrations `recorded` (null: it may). */
export function whyMigrationsUnknownHere(recorded: string[], known: string[] = Object.keys(migrationsFor('sqlite'))): string | null {
  const unknown = recorded.filter((name) => !known.includes(name)).sort();
  if (unknown.length === 0) return null;
  const latestHere = known.at(-1)!;
  const names = unknown.join(', ');
  if (unknown.every((name) => name > latestHere)) {
    return `this database was migrated by a newer release of agent-channel (it records migration ${names}, which this release, `
      + `at ${latestHere}, does not have); nothing was changed. Run that release or a later one, or restore a backup taken before the upgrade`;
  }
  return `this database records migrations this release of agent-channel does not have (${names}; this release is at ${latestHere}): `
    + 'another build migrated it; nothing was changed. Run the build that migrated it, or restore a backup';
}

/** Is this a unique-constraint violation, in either dialect? */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: string; errcode?: string; message?: string };
  return e?.code === '23505' || /UNIQUE constraint failed/.test(e?.message ?? '');
}
