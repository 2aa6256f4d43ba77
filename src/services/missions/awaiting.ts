import type { Kysely } from 'kysely';
import { prepared } from '../../store/prepared.ts';
import type { DB } from '../../store/schema.ts';
import { LIVE_MISSION } from './lifecycle.ts';
import type { AwaitingItem } from './schemas.ts';

// Read with every send result and transcript page: built once (see store/prepared.ts).
const pendingActionsOf = prepared((db, sessionId: string) => db.selectFrom('actions').innerJoin('missions', 'missions.id', 'actions.mission_id')
  .select(['actions.id', 'actions.kind', 'actions.summary', 'actions.created_at'])
  .where('actions.session_id', '=', sessionId).where('actions.status', '=', 'pending').where('missions.status', 'in', LIVE_MISSION));
const openQuestionsOf = prepared((db, sessionId: string) => db.selectFrom('questions').innerJoin('missions', 'missions.id', 'questions.mission_id')
  .select(['questions.id', 'questions.text', 'questions.answer_type', 'questions.created_at'])
  .where('questions.session_id', '=', sessionId).where('questions.status', '=', 'open').where('missions.status', 'in', LIVE_MISSION));

/**
 * What the agent waits for in a session (§9.2): its live missions' pending actions and open
 * questions, oldest first. Only the session's owner reads it (with the send result or the
 * transcript), and the owner may settle all of them.
 */
export async function awaitingIn(db: Kysely<DB>, sessionId: string): Promise<AwaitingItem[]> {
  const [actions, questions] = await Promise.all([pendingActionsOf(db, sessionId), openQuestionsOf(db, sessionId)]);
  const items = [
    ...actions.map((a) => ({ at: a.created_at, id: a.id, item: { type: 'action' as const, operation_id: a.id, kind: a.kind, summary: a.summary } })),
    ...questions.map((q) => ({ at: q.created_at, id: q.id, item: { type: 'question' as const, request_id: q.id, text: q.text, answer_type: q.answer_type } })),
  ];
  items.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.id < b.id ? -1 : 1));
  return items.map((entry) => entry.item);
}

/**
 * How many items the agent waits for in each of `sessionIds` (what awaitingIn would list,
 * counted; a session with none is left out): one query for a whole page of sessions.
 */
export async function awaitingCounts(db: Kysely<DB>, sessionIds: readonly string[]): Promise<Map<string, number>> {
  if (sessionIds.length === 0) return new Map();
  const rows = await db.selectFrom('actions').innerJoin('missions', 'missions.id', 'actions.mission_id')
    .select('actions.session_id as session_id')
    .where('actions.session_id', 'in', sessionIds).where('actions.status', '=', 'pending').where('missions.status', 'in', LIVE_MISSION)
    .unionAll(db.selectFrom('questions').innerJoin('missions', 'missions.id', 'questions.mission_id')
      .select('questions.session_id as session_id')
      .where('questions.session_id', 'in', sessionIds).where('questions.status', '=', 'open').where('missions.status', 'in', LIVE_MISSION))
    .execute();
  const counts = new Map<string, number>();
  for (const row of rows) counts.set(row.session_id, (counts.get(row.session_id) ?? 0) + 1);
  return counts;
}
