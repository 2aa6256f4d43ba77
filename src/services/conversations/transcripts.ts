import type { Kysely } from 'kysely';
import { looksLikeId } from '../../domain/ids.ts';
import { pageLimit } from '../../domain/paging.ts';
import { Problem } from '../../domain/problems.ts';
import { isValidTs } from '../../domain/turn-clock.ts';
import { openJobsOf, ownSessionWithStatus, statusOfSession, type SessionStatus } from '../../engine/queue-sql.ts';
import { readLastTurns, readTranscript } from '../../store/repos/transcript.ts';
import { prepared } from '../../store/prepared.ts';
import type { DB, Session } from '../../store/schema.ts';
import type { Hold, Wakeups } from '../../engine/wakeups.ts';
import { awaitingCounts, awaitingIn } from '../missions/awaiting.ts';
import type { TranscriptResult } from './schemas.ts';

/** How a read of the transcript may be held until a turn newer than `after` exists (§9.1), and what wakes it. */
export type TranscriptHold = Hold & { wakeups: Wakeups };

/** What the chat opens with: the newest page, and whether older turns exist. */
export type LatestTranscript = TranscriptResult & { has_earlier: boolean };

/** A session as the web app lists it. */
export interface SessionListItem {
  session_id: string;
  agent_id: string;
  agent_name: string;
  channel: string;
  created_at: string;
  last_activity: string;
  status: SessionStatus;
  /** How many actions and questions the agent waits for in it (§9.2's `awaiting`, counted): 0 when none. */
  awaiting: number;
  /** The latest turn, so that a list of conversations can tell them apart; absent for a session with none. */
  last_turn?: { role: 'user' | 'agent'; text: string };
}

const ownSession = prepared((db, sessionId: string, userId: string) => db.selectFrom('sessions').selectAll()
  .where('id', '=', sessionId).where('user_id', '=', userId));

/** The caller's session; another account's is as missing as one that never was. */
export async function findOwnSession(db: Kysely<DB>, userId: string, sessionId: string): Promise<Session | undefined> {
  if (!looksLikeId('session', sessionId)) return undefined;
  const [session] = await ownSession(db, sessionId, userId);
  return session;
}

/**
 * §4: turns after `after`, oldest first; other accounts' sessions are "not found". With `hold`
 * and `after`, a read that finds no newer turn waits for one (written by any instance) until
 * the hold ends, then answers with what is there (§9.1).
 */
export async function transcript(
  db: Kysely<DB>, userId: string, sessionId: string, options: { after?: string | undefined; limit?: number | undefined } = {},
  hold: TranscriptHold | null = null,
): Promise<TranscriptResult> {
  // Listening before the first read: a turn committed between the read and the wait still wakes it.
  const listener = hold && options.after !== undefined && hold.waitMs > 0 ? hold.wakeups.listen(`session:${sessionId}`) : null;
  try {
    const deadline = Date.now() + (hold?.waitMs ?? 0);
    // After the hold ends, one more read: the page and the status as they are then.
    for (let holdOver = !listener; ; ) {
      const { session, status, page } = await readPage(db, userId, sessionId, 'after', options.after, options.limit, readTranscript);
      if (page.messages.length > 0 || holdOver) {
        return { session_id: session.id, agent_id: session.agent_id, status, messages: page.messages, has_more: page.hasMore, awaiting: await awaitingIn(db, userId, session.id) };
      }
      holdOver = !(await listener!.next(deadline - Date.now(), hold!.signal));
    }
  } finally {
    listener?.stop();
  }
}

/**
 * A transcript's newest turns (before `before`, exclusive, when given), oldest first, for the
 * chat: a long conversation opens at its end. `has_earlier` says whether older turns exist.
 */
export async function latestTranscript(
  db: Kysely<DB>, userId: string, sessionId: string, options: { before?: string | undefined; limit?: number | undefined } = {},
): Promise<LatestTranscript> {
  const { session, status, page } = await readPage(db, userId, sessionId, 'before', options.before, options.limit, readLastTurns);
  return {
    session_id: session.id, agent_id: session.agent_id, status, messages: page.messages, has_more: options.before !== undefined,
    has_earlier: page.hasMore, awaiting: await awaitingIn(db, userId, session.id),
  };
}

/** One page of a session's turns, its cursor and limit checked before the session is looked up. */
async function readPage(
  db: Kysely<DB>, userId: string, sessionId: string, cursorName: 'after' | 'before', cursor: string | undefined, limitOption: number | undefined,
  read: typeof readTranscript,
) {
  if (cursor !== undefined && !isValidTs(cursor)) {
    throw Problem.validation([{ path: cursorName, message: 'must be a turn ts such as 2026-11-22T12:34:56.789012Z' }]);
  }
  const limit = pageLimit(limitOption);
  // The session with its status first, then the page, never side by side: "idle" then means
  // every job that existed when the status was read had ended, so the page (read later) holds
  // all of their turns. Read the other way round, a reply committed between the two reads could
  // be missing from a page that says "idle", and a client that stops polling at idle would
  // never see it.
  const found = looksLikeId('session', sessionId) ? await ownSessionWithStatus(db, sessionId, userId) : undefined;
  if (!found) throw new Problem('session_not_found', 'No such session.');
  const { session, status } = found;
  const page = await read(db, session.id, cursor ?? null, limit);
  return { session, status, page };
}

/**
 * One page of the account's sessions, most recently active first, each with its status: three
 * queries whatever the page size (the sessions with their status, then their latest turns and
 * what their agents wait for).
 * `cursor` is the `next_cursor` of the page before (opaque).
 */
export async function listSessionsPage(
  db: Kysely<DB>, userId: string, options: { limit?: number | undefined; cursor?: string | undefined } = {},
): Promise<{ sessions: SessionListItem[]; next_cursor: string | null }> {
  const limit = pageLimit(options.limit);
  let after: { activity: string; id: string } | null = null;
  if (options.cursor !== undefined) {
    const [activity, id] = Buffer.from(options.cursor, 'base64url').toString('utf8').split('\n');
    if (!activity || !id || !looksLikeId('session', id) || (!isValidTs(activity) && Number.isNaN(Date.parse(activity)))) {
      throw Problem.validation([{ path: 'cursor', message: 'must be the next_cursor of an earlier page' }]);
    }
    after = { activity, id };
  }
  const rows = await db.selectFrom('sessions')
    .innerJoin('agents', 'agents.id', 'sessions.agent_id')
    .select((eb) => ['sessions.id', 'sessions.agent_id', 'agents.name as agent_name', 'sessions.channel', 'sessions.created_at',
      eb.fn.coalesce('sessions.last_ts', 'sessions.created_at').as('activity'), ...openJobsOf(eb)])
    .where('sessions.user_id', '=', userId)
    .$if(after !== null, (q) => q.where((eb) => {
      const activity = eb.fn.coalesce('sessions.last_ts', 'sessions.created_at');
      return eb.or([eb(activity, '<', after!.activity), eb.and([eb(activity, '=', after!.activity), eb('sessions.id', '>', after!.id)])]);
    }))
    .orderBy('activity', 'desc').orderBy('sessions.id').limit(limit + 1).execute();
  const page = rows.slice(0, limit);
  // Each session's latest turn is the one at its latest ts: one index lookup per session.
  const [latest, awaiting] = await Promise.all([
    page.length === 0 ? [] : db.selectFrom('turns').select(['session_id', 'role', 'text'])
      .where((eb) => eb.or(page.map((r) => eb.and([eb('session_id', '=', r.id), eb('ts', '=', r.activity)])))).execute(),
    awaitingCounts(db, userId, page.map((r) => r.id)),
  ]);
  const latestBySession = new Map(latest.map((turn) => [turn.session_id, { role: turn.role, text: turn.text }]));
  const last = page.at(-1);
  return {
    sessions: page.map((r) => {
      const lastTurn = latestBySession.get(r.id);
      return {
        session_id: r.id, agent_id: r.agent_id, agent_name: r.agent_name, channel: r.channel, created_at: r.created_at,
        last_activity: r.activity, status: statusOfSession(r), awaiting: awaiting.get(r.id) ?? 0, ...(lastTurn ? { last_turn: lastTurn } : {}),
      };
    }),
    next_cursor: rows.length > limit && last ? Buffer.from(`${last.activity}\n${last.id}`).toString('base64url') : null,
  };
}
