import type { Kysely } from 'kysely';
import type { FeedEvent } from '../../domain/feed-events.ts';
import { toFeedEvent } from './events.ts';
import type { DB, TelegramChatsTable, TelegramMessagesTable } from '../schema.ts';
import type { Selectable } from 'kysely';

/** Every statement of the Telegram channel (docs/telegram.md), one concern a section. */

export type TelegramChat = Selectable<TelegramChatsTable>;
export type TelegramMessage = Selectable<TelegramMessagesTable>;

// --- link codes ---

export async function insertLinkCode(db: Kysely<DB>, codeHash: string, userId: string, createdAt: string, expiresAt: string): Promise<void> {
  await db.insertInto('telegram_link_codes').values({ code_hash: codeHash, user_id: userId, created_at: createdAt, expires_at: expiresAt, used_at: null }).execute();
}

/** Uses a code once: the account it links to, or null when it is unknown, used, or past its time. */
export async function useLinkCode(db: Kysely<DB>, codeHash: string, now: string): Promise<string | null> {
  const row = await db.updateTable('telegram_link_codes').set({ used_at: now })
    .where('code_hash', '=', codeHash).where('used_at', 'is', null).where('expires_at', '>', now)
    .returning('user_id').executeTakeFirst();
  return row?.user_id ?? null;
}

export async function deleteLinkCodesBefore(db: Kysely<DB>, cutoff: string): Promise<void> {
  await db.deleteFrom('telegram_link_codes').where('expires_at', '<', cutoff).execute();
}

// --- chats ---

/**
 * Links a chat to an account: one chat an account, so the account's chat linked before, and
 * this chat's link to another account, end.
 */
export async function linkChat(db: Kysely<DB>, chatId: string, userId: string, eventCursor: number, now: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const before = await trx.selectFrom('telegram_chats').select('chat_id')
      .where((eb) => eb.or([eb('chat_id', '=', chatId), eb('user_id', '=', userId)])).execute();
    const ids = [chatId, ...before.map((c) => c.chat_id)];
    await trx.deleteFrom('telegram_messages').where('chat_id', 'in', ids).execute();
    await trx.deleteFrom('telegram_chats').where('chat_id', 'in', ids).execute();
    await trx.insertInto('telegram_chats').values({ chat_id: chatId, user_id: userId, agent_id: null, session_id: null, event_cursor: eventCursor, linked_at: now }).execute();
  });
}

/** Unlinks chats: one (by chat id), or every chat of an account; returns the chat ids unlinked. */
export async function unlinkChats(db: Kysely<DB>, where: { chatId: string } | { userId: string }): Promise<string[]> {
  return db.transaction().execute(async (trx) => {
    const chats = await trx.selectFrom('telegram_chats').select('chat_id')
      .$if('chatId' in where, (q) => q.where('chat_id', '=', (where as { chatId: string }).chatId))
      .$if('userId' in where, (q) => q.where('user_id', '=', (where as { userId: string }).userId)).execute();
    const ids = chats.map((c) => c.chat_id);
    if (ids.length === 0) return [];
    await trx.deleteFrom('telegram_messages').where('chat_id', 'in', ids).execute();
    await trx.deleteFrom('telegram_chats').where('chat_id', 'in', ids).execute();
    return ids;
  });
}

export async function findChat(db: Kysely<DB>, chatId: string): Promise<TelegramChat | null> {
  return (await db.selectFrom('telegram_chats').selectAll().where('chat_id', '=', chatId).executeTakeFirst()) ?? null;
}

export async function chatsOfUser(db: Kysely<DB>, userId: string): Promise<TelegramChat[]> {
  return db.selectFrom('telegram_chats').selectAll().where('user_id', '=', userId).orderBy('linked_at').execute();
}

/** The chat's agent and session from now on (null session: the next message starts one). */
export async function setChatTarget(db: Kysely<DB>, chatId: string, agentId: string | null, sessionId: string | null): Promise<void> {
  await db.updateTable('telegram_chats').set({ agent_id: agentId, session_id: sessionId }).where('chat_id', '=', chatId).execute();
}

// --- the inbox of updates ---

/** Keeps updates not seen before (by update_id); returns how many were new. */
export async function insertUpdates(db: Kysely<DB>, updates: readonly { update_id: number }[], now: string): Promise<number> {
  if (updates.length === 0) return 0;
  const rows = await db.insertInto('telegram_updates')
    .values(updates.map((u) => ({ update_id: u.update_id, payload: JSON.stringify(u), status: 'pending' as const, received_at: now })))
    .onConflict((oc) => oc.column('update_id').doNothing()).returning('update_id').execute();
  return rows.length;
}

export async function pendingUpdates(db: Kysely<DB>, limit: number): Promise<{ update_id: number; payload: string }[]> {
  const rows = await db.selectFrom('telegram_updates').select(['update_id', 'payload'])
    .where('status', '=', 'pending').orderBy('update_id').limit(limit).execute();
  return rows.map((r) => ({ update_id: Number(r.update_id), payload: r.payload }));
}

export async function markUpdateDone(db: Kysely<DB>, updateId: number): Promise<void> {
  await db.updateTable('telegram_updates').set({ status: 'done' }).where('update_id', '=', updateId).execute();
}

export async function deleteUpdatesBefore(db: Kysely<DB>, cutoff: string): Promise<number> {
  const result = await db.deleteFrom('telegram_updates').where('status', '=', 'done').where('received_at', '<', cutoff).executeTakeFirst();
  return Number(result.numDeletedRows);
}

// --- the bot's messages that settle an item ---

export async function recordMessage(db: Kysely<DB>, message: TelegramMessage): Promise<void> {
  await db.insertInto('telegram_messages').values(message).onConflict((oc) => oc.columns(['chat_id', 'message_id']).doNothing()).execute();
}

export async function findMessage(db: Kysely<DB>, chatId: string, messageId: number): Promise<TelegramMessage | null> {
  const row = await db.selectFrom('telegram_messages').selectAll().where('chat_id', '=', chatId).where('message_id', '=', messageId).executeTakeFirst();
  return row ? { ...row, message_id: Number(row.message_id) } : null;
}

export async function openMessagesOf(db: Kysely<DB>, itemId: string): Promise<TelegramMessage[]> {
  const rows = await db.selectFrom('telegram_messages').selectAll().where('item_id', '=', itemId).where('open', '=', 1).execute();
  return rows.map((r) => ({ ...r, message_id: Number(r.message_id) }));
}

/** Closes an item's open messages (their buttons were removed). */
export async function closeMessagesOf(db: Kysely<DB>, itemId: string): Promise<void> {
  await db.updateTable('telegram_messages').set({ open: 0 }).where('item_id', '=', itemId).where('open', '=', 1).execute();
}

// --- the events to deliver ---

export interface ChatEvent {
  chatId: string;
  position: number;
  event: FeedEvent;
  /** Of one of the person's Telegram sessions: sent to the chat. Others are only passed over. */
  forTheChat: boolean;
}

/**
 * Each linked person's events after their chat's cursor, in position order, each saying whether
 * it belongs to one of their Telegram sessions (channel `telegram`, whichever channel a later
 * message came through). Each person's events become visible in position order
 * (repos/events.ts), and a chat's cursor moves over its person's events only, so none is skipped;
 * it moves over the others too, so that they are not read again. (A session's channel is written
 * with its first turn, in the transaction that makes its first event possible.)
 */
export async function eventsToDeliver(db: Kysely<DB>, limit: number): Promise<ChatEvent[]> {
  const rows = await db.selectFrom('telegram_chats as c')
    .innerJoin('events as e', 'e.recipient_user_id', 'c.user_id')
    .leftJoin('sessions as s', (join) => join.onRef('s.id', '=', 'e.session_id').onRef('s.user_id', '=', 'c.user_id'))
    .select(['c.chat_id', 'e.id', 'e.type', 'e.session_id', 'e.agent_id', 'e.data', 'e.created_at', 's.channel'])
    .whereRef('e.id', '>', 'c.event_cursor').orderBy('e.id').limit(limit).execute();
  return rows.map((row) => ({ chatId: row.chat_id, position: Number(row.id), event: toFeedEvent(row), forTheChat: row.channel === 'telegram' }));
}

export async function advanceCursor(db: Kysely<DB>, chatId: string, position: number): Promise<void> {
  await db.updateTable('telegram_chats').set({ event_cursor: position }).where('chat_id', '=', chatId).where('event_cursor', '<', position).execute();
}

// --- the lease of the one instance that polls and delivers ---

/** Takes or renews the lease until `expiresAt` (ms): true when this owner holds it. */
export async function claimLease(db: Kysely<DB>, name: string, owner: string, now: number, expiresAt: number): Promise<boolean> {
  await db.insertInto('telegram_lease').values({ name, owner, expires_at: expiresAt }).onConflict((oc) => oc.column('name').doNothing()).execute();
  const taken = await db.updateTable('telegram_lease').set({ owner, expires_at: expiresAt })
    .where('name', '=', name).where((eb) => eb.or([eb('owner', '=', owner), eb('expires_at', '<', now)])).returning('owner').executeTakeFirst();
  return taken !== undefined;
}

export async function releaseLease(db: Kysely<DB>, name: string, owner: string): Promise<void> {
  await db.deleteFrom('telegram_lease').where('name', '=', name).where('owner', '=', owner).execute();
}
