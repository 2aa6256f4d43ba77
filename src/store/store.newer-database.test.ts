/**
 * Version skew: an operator rolls back to an older release after a newer one migrated the
 * database. The older release cannot know what the newer migrations changed, so it must refuse
 * at start, saying why and what to do, and change nothing. A newer release is simulated by
 * recording a migration this one does not have.
 */
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { runCli } from '../testing/cli.ts';
import { databaseEnv, freshDatabase, seedAccount, type TestDatabase } from '../testing/harness.ts';
import { startServerProcess } from '../testing/server-process.ts';
import { migrationsFor, openStore } from './store.ts';

/** This release's last migration, and a name that sorts after any it will ever have (a newer release's). */
const LATEST = Object.keys(migrationsFor('sqlite')).sort().at(-1)!;
const FROM_A_NEWER_RELEASE = '999_from_a_newer_release';
const quoted = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const NEWER = new RegExp(`^this database was migrated by a newer release of agent-channel \\(it records migration ${FROM_A_NEWER_RELEASE}, which this release, at ${quoted(LATEST)}, does not have\\); nothing was changed\\. Run that release or a later one, or restore a backup taken before the upgrade$`);

const storeOptions = (database: TestDatabase) => (database.pgSchema ? { pgSchema: database.pgSchema } : {});

/** A database at this release's level with one account, then marked with `migration` as if another build had run it. */
async function databaseMigratedElsewhere(migration: string): Promise<TestDatabase> {
  const database = await freshDatabase();
  await seedAccount(database, 'rolled-back@example.test', 1);
  const store = await openStore(database.url, storeOptions(database));
  try {
    await sql`insert into kysely_migration (name, timestamp) values (${migration}, ${new Date().toISOString()})`.execute(store.db);
  } finally {
    await store.close();
  }
  return database;
}

/** Everything the database holds that a refusal must leave alone: the migrations recorded, the tables, the account. */
async function contents(database: TestDatabase) {
  if (database.pgSchema) {
    const raw = new pg.Client({ connectionString: database.url, options: `-c search_path=${database.pgSchema}` });
    await raw.connect();
    try {
      const migrations = (await raw.query('select name, timestamp from kysely_migration order by name')).rows;
      const tables = (await raw.query('select tablename from pg_tables where schemaname = current_schema() order by tablename')).rows;
      const users = (await raw.query('select * from users order by id')).rows;
      return { migrations, tables, users };
    } finally {
      await raw.end();
    }
  }
  const file = new DatabaseSync(database.url.slice('sqlite:'.length), { readOnly: true });
  try {
    return {
      migrations: file.prepare('select name, timestamp from kysely_migration order by name').all(),
      tables: file.prepare(`select name from sqlite_master where type = 'table' order by name`).all(),
      users: file.prepare('select * from users order by id').all(),
    };
  } finally {
    file.close();
  }
}

test('a database migrated by a newer release is refused at open, naming the migration, and left as it was', async () => {
  const database = await databaseMigratedElsewhere(FROM_A_NEWER_RELEASE);
  try {
    const before = await contents(database);
    await assert.rejects(openStore(database.url, storeOptions(database)), (error: Error) => {
      assert.match(error.message, NEWER);
      return true;
    });
    assert.deepEqual(await contents(database), before);
  } finally {
    await database.drop();
  }
});

test('the CLI and serve refuse a newer database in one line, without a stack, and exit 1', { timeout: 60_000 }, async () => {
  const database = await databaseMigratedElsewhere(FROM_A_NEWER_RELEASE);
  try {
    const env = databaseEnv(database);
    const cli = await runCli(env, 'keys', 'list', '--email', 'rolled-back@example.test');
    assert.equal(cli.code, 1);
    assert.equal(cli.stdout, '');
    const [line, ...rest] = cli.stderr.trimEnd().split('\n');
    assert.deepEqual(rest, [], 'one line');
    assert.match(line!.replace(/^agent-channel: /, ''), NEWER);

    await assert.rejects(startServerProcess(env), (error: Error) => {
      const output = error.message.replace(/^server exited before listening:\n/, '').trimEnd();
      assert.doesNotMatch(output, /^\s+at /m, 'no stack');
      assert.match(output.replace(/^agent-channel: /, ''), NEWER);
      return true;
    });
  } finally {
    await database.drop();
  }
});

test('a database recording a migration this release never had among its own is refused as the work of another build', async () => {
  // Such as 007_account_lists, which a development build between two releases ran and which was renamed before any release.
  const database = await databaseMigratedElsewhere('007_account_lists');
  try {
    await assert.rejects(openStore(database.url, storeOptions(database)), new RegExp('^Error: this database records migrations this release of agent-channel does not have '
      + `\\(007_account_lists; this release is at ${quoted(LATEST)}\\): another build migrated it; nothing was changed\\. Run the build that migrated it, or restore a backup$`));
  } finally {
    await database.drop();
  }
});
