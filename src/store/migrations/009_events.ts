import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';

/**
 * The event feed (contract §9.3), an outbox: each event is written in the transaction of the
 * change it reports, one row per person who may see it (the session's owner; a question's
 * `asked_of` too), so that each person's feed is one index range in commit order.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const pg = dialect === 'postgres';
  await db.schema
    .createTable('events')
    .addColumn('id', pg ? 'bigserial' : 'integer', (c) => (pg ? c.primaryKey() : c.primaryKey().autoIncrement()))
    .addColumn('recipient_user_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('agent_id', 'text', (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('events_recipient').on('events').columns(['recipient_user_id', 'id']).execute();
  await db.schema.createIndex('events_recipient_session').on('events').columns(['recipient_user_id', 'session_id', 'id']).execute();
  await db.schema.createIndex('events_created').on('events').columns(['created_at']).execute();
  // What a session waits for (§9.2) is read with every send result and transcript page.
  await db.schema.createIndex('actions_session_status').on('actions').columns(['session_id', 'status']).execute();
  await db.schema.createIndex('questions_session_status').on('questions').columns(['session_id', 'status']).execute();
}
