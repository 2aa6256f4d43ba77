import type { Kysely, Transaction } from 'kysely';
import { eventIdOf, type FeedEvent, type FeedEventType, type NewFeedEvent } from '../../domain/feed-events.ts';
import type { DB } from '../schema.ts';
import type { Dialect } from '../dialect.ts';
import { lockKeysAhead, sendAhead } from '../postgres-dialect.ts';
import { fanOutDeliveries, subscribedEndpointsOf } from './webhooks.ts';

/**
 * Every statement of the event feed (contract §9.3). A person's feed is their rows in position
 * order, and a reader pages with the last position it saw, so no event may become visible at
 * a position below one a reader has already passed:
 * - SQLite writes one transaction at a time: positions are drawn in commit order.
 * - PostgreSQL draws positions from a sequence at insert, and transactions commit in any order.
 *   So a transaction that records events holds each recipient's feed (an advisory lock, taken
 *   in one global order, so two transactions never wait on each other crosswise) from before
 *   its first insert until it commits: positions of one person's events are drawn and made
 *   visible in the same order. The lock is taken as the transaction's last work (see
 *   UnitRun's outbox), so it is held for the commit alone: it goes out with the insert and the
 *   commit (sendAhead), unless webhook deliveries need the events' ids first.
 */
/** Returns how many webhook deliveries were written with the events. */
export async function recordEvents(trx: Transaction<DB>, dialect: Dialect, events: readonly NewFeedEvent[], createdAt: string): Promise<number> {
  const rows = events.flatMap((event) => [...new Set(event.recipients)].map((recipient) => ({
    recipient_user_id: recipient, type: event.type, session_id: event.sessionId, agent_id: event.agentId,
    data: JSON.stringify(event.data), created_at: createdAt,
  })));
  if (rows.length === 0) return 0;
  const recipients = [...new Set(rows.map((row) => row.recipient_user_id))].sort();
  // Read before the feed locks below, which are held until the commit.
  const endpoints = await subscribedEndpointsOf(trx, recipients);
  const insert = trx.insertInto('events').values(rows);
  if (dialect === 'postgres') {
    // Sent ahead, and with no webhook to feed the insert too: the locks, the insert and the
    // commit go out together, so a person's feed is held while PostgreSQL runs them, not across
    // round trips.
    await lockKeysAhead(trx, recipients.map((recipient) => `agent-channel feed ${recipient}`));
    if (endpoints.length === 0) {
      await sendAhead(trx, insert.compile());
      return 0;
    }
  } else if (endpoints.length === 0) {
    await insert.execute();
    return 0;
  }
  // The webhooks' deliveries of these events, in the same transaction: none is lost to a crash.
  const recorded = await insert.returning(['id', 'recipient_user_id', 'type', 'session_id', 'agent_id', 'data', 'created_at']).execute();
  return fanOutDeliveries(trx, endpoints, recorded.map((row) => ({
    eventId: eventIdOf(Number(row.id)), recipientUserId: row.recipient_user_id, type: row.type, payload: JSON.stringify(toFeedEvent(row)),
  })), createdAt);
}

type EventRow = { id: number | string; type: string; session_id: string; agent_id: string; data: string; created_at: string };

/** A row of `events` as the feed shows it. */
export const toFeedEvent = (row: EventRow): FeedEvent => ({
  id: eventIdOf(Number(row.id)), type: row.type as FeedEventType, created_at: row.created_at,
  session_id: row.session_id, agent_id: row.agent_id, data: JSON.parse(row.data) as FeedEvent['data'],
});

/** A page of a person's events after `afterPosition` (0: from the oldest kept), oldest first. */
export async function readEvents(
  db: Kysely<DB>, recipient: string, afterPosition: number, limit: number, sessionId: string | null = null,
): Promise<{ events: FeedEvent[]; hasMore: boolean }> {
  const rows = await db.selectFrom('events').select(['id', 'type', 'session_id', 'agent_id', 'data', 'created_at'])
    .where('recipient_user_id', '=', recipient).where('id', '>', afterPosition)
    .$if(sessionId !== null, (q) => q.where('session_id', '=', sessionId!))
    .orderBy('id').limit(limit + 1).execute();
  return { events: rows.slice(0, limit).map(toFeedEvent), hasMore: rows.length > limit };
}

/** The position of a person's newest event (0 when none): a stream that starts "with the next new event" starts after it. */
export async function newestPosition(db: Kysely<DB>, recipient: string): Promise<number> {
  const row = await db.selectFrom('events').select((eb) => eb.fn.max('id').as('newest'))
    .where('recipient_user_id', '=', recipient).executeTakeFirst();
  return Number(row?.newest ?? 0);
}

/**
 * What a cursor names for `recipient`: one of their events (`mine`), an event that is gone with
 * the retention (`expired`: below every event kept, or none is kept), or no event of theirs.
 */
export async function cursorStanding(db: Kysely<DB>, recipient: string, position: number): Promise<'mine' | 'expired' | 'unknown'> {
  const row = await db.selectFrom('events').select('recipient_user_id').where('id', '=', position).executeTakeFirst();
  if (row) return row.recipient_user_id === recipient ? 'mine' : 'unknown';
  const oldest = await db.selectFrom('events').select((eb) => eb.fn.min('id').as('oldest')).executeTakeFirst();
  return oldest?.oldest == null || position < Number(oldest.oldest) ? 'expired' : 'unknown';
}

/** Deletes events recorded before `cutoff` (ISO time); returns how many. */
export async function deleteEventsBefore(db: Kysely<DB>, cutoff: string): Promise<number> {
  const result = await db.deleteFrom('events').where('created_at', '<', cutoff).executeTakeFirst();
  return Number(result.numDeletedRows);
}
