import type { Kysely } from 'kysely';

/**
 * Secrets every instance of one deployment must share, made once by whichever instance needs
 * one first (see repos/instance-secrets.ts). The web app's sealing key lives here, so a value
 * sealed on one instance opens on another and after a restart.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('instance_secrets')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
}
