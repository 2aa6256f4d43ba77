import type { Kysely } from 'kysely';

/**
 * A person's live missions. Before every list of actions or questions the missions involving the
 * caller are checked for orphans (a session, agent or membership gone); without this index that
 * check read every live mission of every account (and the questions list every open question).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('missions_owner_status').on('missions').columns(['owner_user_id', 'status']).execute();
}
