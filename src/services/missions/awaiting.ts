import { type Kysely, sql } from 'kysely';
import { prepared } from '../../store/prepared.ts';
import type { DB } from '../../store/schema.ts';
import { openQuestionsFor, pendingActionsOf } from './lists.ts';
import type { AwaitingItem } from './schemas.ts';

/**
 * The items of the caller's lists (§5, §6) in some sessions, as one UNION ALL of the lists' own
 * queries, while the caller is still a member of the agent's workspace: the lists close the
 * missions of someone who left before they read, which a read with every send cannot afford, and
 * what those missions wait on can no longer be settled by that person.
 */
function awaitingItems(db: Kysely<DB>, userId: string, sessionIds: string | readonly string[]) {
  const stillMember = (agentId: 'actions.agent_id' | 'questions.agent_id') => sql<boolean>`exists (select 1 from agents
    inner join memberships on memberships.workspace_id = agents.workspace_id
    where agents.id = ${sql.ref(agentId)} and memberships.user_id = ${userId})`;
  return pendingActionsOf(db, userId, sessionIds)
    .select((eb) => [
      sql<'action' | 'question'>`'action'`.as('type'), 'actions.id as id', 'actions.session_id as session_id', eb.ref('actions.kind').$castTo<string | null>().as('kind'),
      'actions.summary as text', sql<string | null>`null`.as('answer_type'), 'actions.created_at as created_at',
    ])
    .where(stillMember('actions.agent_id'))
    .unionAll(openQuestionsFor(db, userId, sessionIds)
      .select((eb) => [
        sql<'action' | 'question'>`'question'`.as('type'), 'questions.id as id', 'questions.session_id as session_id', sql<string | null>`null`.as('kind'),
        'questions.text as text', eb.ref('questions.answer_type').$castTo<string | null>().as('answer_type'), 'questions.created_at as created_at',
      ])
      .where(stillMember('questions.agent_id')));
}

// Read with every send result and transcript page: built once (see store/prepared.ts).
const awaitingRows = prepared((db, userId: string, sessionId: string) => awaitingItems(db, userId, sessionId)
  .orderBy('created_at').orderBy('id'));

/**
 * What the agent waits for in a session (§9.2): the session's open pending actions and open
 * questions that the caller can settle (those the caller's lists give), oldest first.
 */
export async function awaitingIn(db: Kysely<DB>, userId: string, sessionId: string): Promise<AwaitingItem[]> {
  return (await awaitingRows(db, userId, sessionId)).map((row) => (row.type === 'action'
    ? { type: 'action', operation_id: row.id, kind: row.kind!, summary: row.text }
    : { type: 'question', request_id: row.id, text: row.text, answer_type: row.answer_type! }));
}

/**
 * How many items the agent waits for in each of `sessionIds` (what awaitingIn would list,
 * counted; a session with none is left out): one query for a whole page of sessions.
 */
export async function awaitingCounts(db: Kysely<DB>, userId: string, sessionIds: readonly string[]): Promise<Map<string, number>> {
  if (sessionIds.length === 0) return new Map();
  const counts = new Map<string, number>();
  for (const row of await awaitingItems(db, userId, sessionIds).execute()) counts.set(row.session_id, (counts.get(row.session_id) ?? 0) + 1);
  return counts;
}
