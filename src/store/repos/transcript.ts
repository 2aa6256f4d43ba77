import type { Kysely, Transaction } from 'kysely';
import { nextTs } from '../../domain/turn-clock.ts';
import type { DB, TurnRole } from '../schema.ts';
import { prepared } from '../prepared.ts';
import type { Dialect } from '../store.ts';

export interface AppendedTurn {
  id: number;
  ts: string;
}

const sessionClockForUpdate = prepared((db, sessionId: string) => db.selectFrom('sessions').select('last_ts').where('id', '=', sessionId).forUpdate());
const sessionClock = prepared((db, sessionId: string) => db.selectFrom('sessions').select('last_ts').where('id', '=', sessionId));
const insertTurn = prepared((db, sessionId: string, role: TurnRole, text: string, ts: string, error: string | null, jobId: number | null) =>
  db.insertInto('turns').values({ session_id: sessionId, role, text, ts, error, job_id: jobId }).returning('id'));
const advanceClock = prepared((db, sessionId: string, ts: string) => db.updateTable('sessions').set({ last_ts: ts }).where('id', '=', sessionId));
// ts strings sort as their times do (fixed format), so `<` compares times.
const advanceClockIfBehind = prepared((db, sessionId: string, ts: string) => db.updateTable('sessions').set({ last_ts: ts })
  .where('id', '=', sessionId).where('last_ts', '<', ts));
const insertSession = prepared((db, id: string, userId: string, agentId: string, channel: string, lastTs: string, createdAt: string) =>
  db.insertInto('sessions').values({ id, user_id: userId, agent_id: agentId, channel, last_ts: lastTs, created_at: createdAt }));

type NewTurn = { sessionId: string; role: TurnRole; text: string; error?: string | null; jobId?: number | null };

/**
 * Appends a turn to a session with the next ts of its clock. The session row is locked
 * (PostgreSQL) for the rest of the transaction, so turns of one session commit in ts order
 * and a reader paging with `after` never skips one.
 */
export async function appendTurn(trx: Transaction<DB>, dialect: Dialect, turn: NewTurn): Promise<AppendedTurn> {
  const appended = await appendTurnIfSessionExists(trx, dialect, turn);
  if (!appended) throw new Error(`session ${turn.sessionId} does not exist`);
  return appended;
}

/** appendTurn, or null when the session was deleted (there is then no transcript to write to). */
export async function appendTurnIfSessionExists(trx: Transaction<DB>, dialect: Dialect, turn: NewTurn): Promise<AppendedTurn | null> {
  const ts = await advanceSessionClock(trx, dialect, turn.sessionId);
  if (ts === null) return null;
  const [inserted] = await insertTurn(trx, turn.sessionId, turn.role, turn.text, ts, turn.error ?? null, turn.jobId ?? null);
  return { id: Number(inserted!.id), ts };
}

/**
 * Takes the session's next ts (see nextTs) and moves its clock there; null if there is no such
 * session. Usually the clock is behind the present and one conditional update does it (and, on
 * PostgreSQL, locks the row as the read below would); otherwise the clock is read (and locked)
 * first.
 */
async function advanceSessionClock(trx: Transaction<DB>, dialect: Dialect, sessionId: string): Promise<string | null> {
  const now = nextTs(null);
  if ((await advanceClockIfBehind.affected(trx, sessionId, now)) === 1) return now;
  const [session] = await (dialect === 'postgres' ? sessionClockForUpdate : sessionClock)(trx, sessionId);
  if (!session) return null;
  const ts = nextTs(session.last_ts);
  await advanceClock.affected(trx, sessionId, ts);
  return ts;
}

/** Creates a session with its first turn: its clock starts at that turn, nothing to read or lock. */
export async function startSession(
  trx: Transaction<DB>,
  session: { id: string; userId: string; agentId: string; channel: string },
  turn: { role: TurnRole; text: string },
): Promise<AppendedTurn> {
  const ts = nextTs(null);
  await insertSession.affected(trx, session.id, session.userId, session.agentId, session.channel, ts, new Date().toISOString());
  const [inserted] = await insertTurn(trx, session.id, turn.role, turn.text, ts, null, null);
  return { id: Number(inserted!.id), ts };
}

export interface TranscriptPage {
  messages: TranscriptMessage[];
  hasMore: boolean;
}

type TranscriptMessage = { role: TurnRole; text: string; ts: string; error?: string };

/** A turn as the transcript shows it: `error` only on a turn that reports a failure. */
const toMessage = (r: { role: TurnRole; text: string; ts: string; error: string | null }): TranscriptMessage =>
  (r.error ? { role: r.role, text: r.text, ts: r.ts, error: r.error } : { role: r.role, text: r.text, ts: r.ts });

// Every poll runs one of these: built once (see ../prepared.ts).
const firstTurns = prepared((db, sessionId: string, limit: number) => db.selectFrom('turns').select(['role', 'text', 'ts', 'error'])
  .where('session_id', '=', sessionId).orderBy('ts').limit(limit));
const turnsAfter = prepared((db, sessionId: string, after: string, limit: number) => db.selectFrom('turns').select(['role', 'text', 'ts', 'error'])
  .where('session_id', '=', sessionId).where('ts', '>', after).orderBy('ts').limit(limit));

/** Turns after `after` (exclusive), oldest first, at most `limit`. */
export async function readTranscript(db: Kysely<DB>, sessionId: string, after: string | null, limit: number): Promise<TranscriptPage> {
  const rows = after === null ? await firstTurns(db, sessionId, limit + 1) : await turnsAfter(db, sessionId, after, limit + 1);
  const hasMore = rows.length > limit;
  return { messages: rows.slice(0, limit).map(toMessage), hasMore };
}

const lastTurns = prepared((db, sessionId: string, limit: number) => db.selectFrom('turns').select(['role', 'text', 'ts', 'error'])
  .where('session_id', '=', sessionId).orderBy('ts', 'desc').limit(limit));
const lastTurnsBefore = prepared((db, sessionId: string, before: string, limit: number) => db.selectFrom('turns').select(['role', 'text', 'ts', 'error'])
  .where('session_id', '=', sessionId).where('ts', '<', before).orderBy('ts', 'desc').limit(limit));

/**
 * The newest `limit` turns (of those before `before`, exclusive, when given), oldest first;
 * `hasMore` says whether earlier turns exist. What a chat shows of a long conversation.
 */
export async function readLastTurns(db: Kysely<DB>, sessionId: string, before: string | null, limit: number): Promise<TranscriptPage> {
  const rows = before === null ? await lastTurns(db, sessionId, limit + 1) : await lastTurnsBefore(db, sessionId, before, limit + 1);
  const hasMore = rows.length > limit;
  return { messages: rows.slice(0, limit).reverse().map(toMessage), hasMore };
}
