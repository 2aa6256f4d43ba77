import { type ExpressionBuilder, type Kysely, sql } from 'kysely';
import { looksLikeId } from '../../domain/ids.ts';
import { pageLimit } from '../../domain/paging.ts';
import { Problem } from '../../domain/problems.ts';
import type { DB } from '../../store/schema.ts';
import { closeOrphanedMissions, LIVE_MISSION, type MissionsDeps } from './lifecycle.ts';
import type { OpenQuestionList, PendingActionList } from './schemas.ts';
import { toOpenQuestion, toPendingAction } from './views.ts';

/** Which page of a list, and of which session's items. */
export interface ListOptions {
  sessionId?: string | undefined;
  limit?: number | undefined;
  after?: string | undefined;
}

/** Where an item stands in a list ordered by (created_at, id): a page cursor's place. */
interface ListPosition {
  created_at: string;
  id: string;
}

/**
 * §5: actions awaiting permission on missions the caller owns, oldest first: all of them, or a
 * page at a time when the caller pages (see listPage); `after` is the operation_id of the last
 * action of the page before (settled since or not).
 */
export async function listActions(deps: MissionsDeps, userId: string, options: ListOptions = {}): Promise<PendingActionList> {
  const { items, has_more } = await listPage(deps, 'actions', userId, options, (position, take) => pendingActionsOf(deps.store.db, userId, options.sessionId)
    .selectAll('actions')
    .$if(position !== undefined, (q) => q.where(laterThan('actions', position!)))
    .orderBy('actions.created_at').orderBy('actions.id')
    .$if(take !== undefined, (q) => q.limit(take!))
    .execute());
  return { actions: items.map(toPendingAction), has_more };
}

/**
 * §6: open questions put to the caller, plus open questions on missions the caller owns (of one
 * session, if given), oldest first: all of them, or a page at a time (`limit`, `after`: as for listActions).
 */
export async function listQuestions(deps: MissionsDeps, userId: string, options: ListOptions = {}): Promise<OpenQuestionList> {
  const { items, has_more } = await listPage(deps, 'questions', userId, options, (position, take) => openQuestionsFor(deps.store.db, userId, options.sessionId)
    .selectAll('questions')
    .$if(position !== undefined, (q) => q.where(laterThan('questions', position!)))
    .orderBy('questions.created_at').orderBy('questions.id')
    .$if(take !== undefined, (q) => q.limit(take!))
    .execute());
  return { questions: items.map(toOpenQuestion), has_more };
}

/** How many actions and questions wait for the caller (in one session, if given): what the lists would list, counted. */
export async function countWaiting(
  deps: MissionsDeps, userId: string, options: { sessionId?: string | undefined } = {},
): Promise<{ actions: number; questions: number }> {
  if (options.sessionId !== undefined && !looksLikeId('session', options.sessionId)) return { actions: 0, questions: 0 };
  await closeOrphanedMissions(deps, { involving: userId });
  const [actions, questions] = await Promise.all([
    pendingActionsOf(deps.store.db, userId, options.sessionId).select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow(),
    openQuestionsFor(deps.store.db, userId, options.sessionId).select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { actions: Number(actions.n), questions: Number(questions.n) }; // PostgreSQL counts as bigint, a string
}

/**
 * What both lists do around their own query, in this order: the page size and the cursor are
 * judged (422) before anything is read; a session id that cannot be one lists nothing (and never
 * reaches the database); missions nobody can settle any more are closed first, so that none of
 * their items is listed. `rowsAfter` reads up to `take` rows after `position` (all, when undefined).
 */
async function listPage<R>(deps: MissionsDeps, table: 'actions' | 'questions', userId: string, options: ListOptions,
  rowsAfter: (position: ListPosition | undefined, take: number | undefined) => Promise<R[]>): Promise<{ items: R[]; has_more: boolean }> {
  const limit = listLimit(options);
  const position = options.after === undefined ? undefined : await positionOf(deps, table, userId, options.after);
  if (options.sessionId !== undefined && !looksLikeId('session', options.sessionId)) return { items: [], has_more: false };
  await closeOrphanedMissions(deps, { involving: userId });
  // One row more than the page: whether it came says whether more follow.
  const rows = await rowsAfter(position, limit === undefined ? undefined : limit + 1);
  return { items: rows.slice(0, limit), has_more: limit !== undefined && rows.length > limit };
}

/**
 * The actions waiting for the caller's permission: pending, on a live mission the caller owns
 * (in one session, or in any of several, if given).
 */
export function pendingActionsOf(db: Kysely<DB>, userId: string, sessionId: string | readonly string[] | undefined) {
  return db.selectFrom('actions')
    .innerJoin('missions', 'missions.id', 'actions.mission_id')
    .where('actions.owner_user_id', '=', userId)
    .where('actions.status', '=', 'pending')
    .where('missions.status', 'in', LIVE_MISSION)
    .$if(sessionId !== undefined, (q) => q.where('actions.session_id', typeof sessionId === 'string' ? '=' : 'in', sessionId!));
}

/**
 * The questions open to the caller: put to them (while still in the agent's workspace), or on a
 * live mission they own (in one session, or in any of several, if given).
 */
export function openQuestionsFor(db: Kysely<DB>, userId: string, sessionId: string | readonly string[] | undefined) {
  return db.selectFrom('questions')
    .innerJoin('missions', 'missions.id', 'questions.mission_id')
    .innerJoin('agents', 'agents.id', 'questions.agent_id')
    // The person asked sees it only while still a member of the agent's workspace.
    .leftJoin('memberships as asked', (join) => join
      .onRef('asked.workspace_id', '=', 'agents.workspace_id').onRef('asked.user_id', '=', 'questions.asked_of'))
    .where('missions.status', 'in', LIVE_MISSION)
    // Put in this shape so that the questions are found through the caller's own two indexes
    // (owner, asked), not by reading every open question of every account.
    .where((eb) => eb.and([
      eb.or([
        eb.and([eb('questions.owner_user_id', '=', userId), eb('questions.status', '=', 'open')]),
        eb.and([eb('questions.asked_of', '=', userId), eb('questions.status', '=', 'open')]),
      ]),
      eb.or([eb('questions.owner_user_id', '=', userId), eb('asked.user_id', 'is not', null)]),
    ]))
    .$if(sessionId !== undefined, (q) => q.where('questions.session_id', typeof sessionId === 'string' ? '=' : 'in', sessionId!));
}

/**
 * Where a page cursor (`after`) stands in a list: the action or question it names, if it is one
 * the caller could have been listed (its owner, or for a question also the person asked).
 * Anything else, missing or another account's alike, is the same 422.
 */
async function positionOf(deps: MissionsDeps, table: 'actions' | 'questions', userId: string, id: string): Promise<ListPosition> {
  const row = looksLikeId(table === 'actions' ? 'action' : 'question', id)
    ? await deps.store.db.selectFrom(table).select(['created_at', 'id']).where('id', '=', id)
      .where((eb) => (table === 'actions'
        ? eb('owner_user_id', '=', userId)
        : eb.or([eb('owner_user_id', '=', userId), eb('asked_of', '=', userId)])))
      .executeTakeFirst()
    : undefined;
  if (!row) {
    const name = table === 'actions' ? 'operation_id of an action' : 'request_id of a question';
    throw Problem.validation([{ path: 'after', message: `must be the ${name} listed to you on an earlier page` }]);
  }
  return { created_at: row.created_at, id: row.id };
}

/**
 * How many items a list of actions or questions holds: every one, as contract §5 and §6 give the
 * lists (a client that knows nothing of paging must not miss any), unless the caller pages with
 * `limit` or `after`; then pageLimit's (50 when only `after` is given).
 */
function listLimit(options: ListOptions): number | undefined {
  return options.limit === undefined && options.after === undefined ? undefined : pageLimit(options.limit);
}

/** Rows after `position` in a list ordered by (created_at, id): the keyset condition of its next page. */
function laterThan<T extends 'actions' | 'questions'>(table: T, position: ListPosition) {
  return (eb: ExpressionBuilder<DB, T>) => {
    const createdAt = sql.ref<string>(`${table}.created_at`);
    return eb.or([
      eb(createdAt, '>', position.created_at),
      eb.and([eb(createdAt, '=', position.created_at), eb(sql.ref<string>(`${table}.id`), '>', position.id)]),
    ]);
  };
}
