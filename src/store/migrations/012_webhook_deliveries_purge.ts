import type { Kysely } from 'kysely';

/**
 * The housekeeping deletes finished webhook deliveries (delivered, or given up) past the
 * retention every minute: by state, then age, so that it reads only what it deletes, not the
 * whole log.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('webhook_deliveries_finished').on('webhook_deliveries').columns(['state', 'created_at']).execute();
}
