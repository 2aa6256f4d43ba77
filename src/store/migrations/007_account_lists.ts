import { sql, type Kysely } from 'kysely';

/**
 * Lists of one account's own things, read in the order the pages show them, so that a page costs
 * what it shows rather than what the account has ever made:
 * - its conversations, latest activity first (a page sorted every session the account had: 47 ms
 *   at 100,000 sessions on SQLite, 30 ms on PostgreSQL, at every page);
 * - the workspaces where it may create agents, and the agents it owns for its plan's count, by
 *   role (each read all of the account's memberships).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index sessions_user_activity on sessions (user_id, coalesce(last_ts, created_at) desc, id)`.execute(db);
  await db.schema.createIndex('memberships_user_role').on('memberships').columns(['user_id', 'role', 'workspace_id']).execute();
  await db.schema.dropIndex('memberships_user').execute(); // its leading column, now in the one above
}
