import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';

/**
 * The Telegram channel (docs/telegram.md): one-time link codes (their SHA-256 only), linked
 * chats (one an account) with the event position each was delivered up to, the
 * updates received (an inbox keyed by Telegram's update_id, so a redelivery is dropped and a
 * crash loses none), the bot's messages that settle an action or a question, and the lease of
 * the one instance that polls and delivers.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const bigint = dialect === 'postgres' ? 'bigint' : 'integer';
  await db.schema.createTable('telegram_link_codes')
    .addColumn('code_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('telegram_link_codes_user').on('telegram_link_codes').columns(['user_id']).execute();
  await db.schema.createTable('telegram_chats')
    .addColumn('chat_id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('agent_id', 'text')
    .addColumn('session_id', 'text')
    .addColumn('event_cursor', bigint, (c) => c.notNull())
    .addColumn('linked_at', 'text', (c) => c.notNull())
    .execute();
  // One chat an account: the sessions started from Telegram (channel `telegram`) are delivered there.
  await db.schema.createIndex('telegram_chats_user').on('telegram_chats').columns(['user_id']).unique().execute();
  await db.schema.createTable('telegram_updates')
    .addColumn('update_id', bigint, (c) => c.primaryKey())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull()) // pending, done
    .addColumn('received_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('telegram_updates_status').on('telegram_updates').columns(['status', 'update_id']).execute();
  await db.schema.createTable('telegram_messages')
    .addColumn('chat_id', 'text', (c) => c.notNull())
    .addColumn('message_id', bigint, (c) => c.notNull())
    .addColumn('item_id', 'text', (c) => c.notNull()) // op_… or req_…
    .addColumn('purpose', 'text', (c) => c.notNull()) // action, question, reject_reason
    .addColumn('open', 'integer', (c) => c.notNull()) // 1 while its buttons are shown
    .addColumn('choices', 'text') // JSON: a question's answers offered as buttons, in button order
    .addPrimaryKeyConstraint('telegram_messages_pk', ['chat_id', 'message_id'])
    .execute();
  await db.schema.createIndex('telegram_messages_item').on('telegram_messages').columns(['item_id']).execute();
  await db.schema.createTable('telegram_lease')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('expires_at', bigint, (c) => c.notNull()) // ms by the store's clock
    .execute();
}
