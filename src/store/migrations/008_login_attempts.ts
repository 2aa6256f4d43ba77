import type { Kysely } from 'kysely';

/**
 * The web app's log-in and sign-up attempts, counted where every instance sees them: with several
 * instances, each kept its own count, so an attacker had the per-account budget once per instance.
 * A row per attempt and what it counts against (an account or a client address, as a fixed-size
 * digest), deleted once out of every window (see services/login-throttle.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('login_attempts')
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('attempt', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull()) // milliseconds, by the store's clock
    .execute();
  await db.schema.createIndex('login_attempts_key_at').on('login_attempts').columns(['key', 'at']).execute();
  await db.schema.createIndex('login_attempts_at').on('login_attempts').columns(['at']).execute();
}
