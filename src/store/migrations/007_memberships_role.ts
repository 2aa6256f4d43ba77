import type { Kysely } from 'kysely';

/**
 * A person's memberships by role: the agents a person owns for the plan's count, and the
 * workspaces where the person may create agents, read all of the person's memberships.
 *
 * Not here: an index of a person's sessions by latest activity, for the web conversation list
 * (it sorts all of the person's sessions: 47 ms a page at 100,000). Every turn moves a session's
 * latest activity, so that index cost every turn an index update: 0.932× the turns a second.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('memberships_user_role').on('memberships').columns(['user_id', 'role', 'workspace_id']).execute();
  await db.schema.dropIndex('memberships_user').execute(); // its leading column, now in the one above
}
