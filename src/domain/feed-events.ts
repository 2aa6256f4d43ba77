import { z } from 'zod';
import { EXAMPLE_IDS } from './ids.ts';

/**
 * The event feed's vocabulary (contract §9.3): what each event type carries, and how an event's
 * id is written. An event id is `evt_` and the event's position in the feed: positions only
 * grow, so a cursor compares as a number.
 */

export const FEED_EVENT_TYPES = [
  'turn.completed', 'turn.failed', 'turn.cancelled',
  'action.pending', 'action.settled',
  'question.opened', 'question.answered', 'question.closed',
] as const;
export type FeedEventType = typeof FEED_EVENT_TYPES[number];

/** Each type's `data`. */
export interface FeedEventData {
  'turn.completed': { text: string; ts: string };
  'turn.failed': { text: string; ts: string; error: string };
  'turn.cancelled': { ts: string };
  'action.pending': { operation_id: string; kind: string; summary: string };
  'action.settled': { operation_id: string; outcome: 'approved' | 'rejected' | 'cancelled' };
  'question.opened': { request_id: string; text: string; answer_type: string; asked_of: string };
  'question.answered': { request_id: string };
  'question.closed': { request_id: string };
}

/**
 * An event as a change records it: `recipients` are the people whose feeds show it (the
 * session's owner; for a question put to someone else, that person too).
 */
export type NewFeedEvent = {
  [T in FeedEventType]: { type: T; sessionId: string; agentId: string; recipients: readonly string[]; data: FeedEventData[T] }
}[FeedEventType];

/** An event as the feed shows it (§9.3). */
export const FeedEventSchema = z.object({
  id: z.string().meta({ description: 'Opaque; the feed\'s order is the order in which the events\' changes were committed.', example: 'evt_1043' }),
  type: z.enum(FEED_EVENT_TYPES),
  created_at: z.string(),
  session_id: z.string(),
  agent_id: z.string().meta({ example: EXAMPLE_IDS.agent }),
  data: z.record(z.string(), z.unknown()).meta({ description: 'By type (contract §9.3): `turn.completed` `{text, ts}`, `turn.failed` `{text, ts, error}`, `turn.cancelled` `{ts}`, `action.pending` `{operation_id, kind, summary}`, `action.settled` `{operation_id, outcome}`, `question.opened` `{request_id, text, answer_type, asked_of}`, `question.answered` / `question.closed` `{request_id}`.' }),
}).meta({ id: 'Event' });
export type FeedEvent = z.infer<typeof FeedEventSchema>;

const EVENT_ID = /^evt_([1-9][0-9]{0,14})$/;

export const eventIdOf = (position: number): string => `evt_${position}`;

/** The position an event id names, or null for a string that is no event id. */
export function positionOf(eventId: string): number | null {
  const match = EVENT_ID.exec(eventId);
  return match ? Number(match[1]) : null;
}
