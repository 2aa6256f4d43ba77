import type { Kysely } from 'kysely';

/**
 * Indexes for statements that ran on every list request, every finished continuation or every
 * housekeeping pass, and read the whole of a table that grows with use (each was a full scan:
 * about 25 ms at 200,000 settled missions, actions or questions, on the event loop on SQLite).
 * Status first: the live rows a statement looks for are few, whatever the history.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // Live missions (the orphan sweep, the housekeeping's active missions).
  await db.schema.createIndex('missions_status').on('missions').columns(['status']).execute();
  // A mission's pending actions / open questions (settling it, closing an orphan), and the
  // approved or executing actions the housekeeping looks at.
  await db.schema.createIndex('actions_status_mission').on('actions').columns(['status', 'mission_id']).execute();
  await db.schema.createIndex('questions_status_mission').on('questions').columns(['status', 'mission_id']).execute();
  // Expired idempotency records, deleted every minute.
  await db.schema.createIndex('idempotency_keys_created').on('idempotency_keys').columns(['created_at']).execute();
}
