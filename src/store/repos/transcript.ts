import { sql, type Kysely, type Transaction } from 'kysely';
import { nextTs } from '../../domain/turn-clock.ts';
import type { DB, TurnRole } from '../schema.ts';
import { prepared } from '../prepared.ts';
import type { Dialect } from '../dialect.ts';

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

// PostgreSQL: each pair of statements above that the usual case runs, as one statement (a
// data-modifying CTE, which SQLite lacks): one round trip instead of two. Same rows, same locks.
const advanceClockIfBehindAndInsertTurn = prepared((db, sessionId: string, ts: string, role: TurnRole, text: string, error: string | null, jobId: number | null) =>
  db.with('moved', (cte) => cte.updateTable('sessions').set({ last_ts: ts }).where('id', '=', sessionId).where('last_ts', '<', ts).returning('id'))
    .insertInto('turns').columns(['session_id', 'role', 'text', 'ts', 'error', 'job_id'])
    .expression((eb) => eb.selectFrom('moved').select([
      'moved.id as session_id', sql.val(role).as('role'), sql.val(text).as('text'), sql.val(ts).as('ts'),
      sql.val(error).as('error'), sql.val(jobId).as('job_id'),
    ]))
    .returning('id'));
const insertSessionAndTurn = prepared((db, id: string, userId: string, agentId: string, channel: string, ts: string, createdAt: string, role: TurnRole, text: string) =>
  db.with('started', (cte) => cte.insertInto('sessions').values({ id, user_id: userId, agent_id: agentId, channel, last_ts: ts, created_at: createdAt }))
    .insertInto('turns').values({ session_id: id, role, text, ts, error: null, job_id: null })
    .returning('id'));

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

/**
 * appendTurn, or null when the session was deleted (there is then no transcript to write to).
 * The turn takes the session's next ts (see nextTs) and moves its clock there. Usually the clock
 * is behind the present and one conditional update does it (and, on PostgreSQL, locks the row as
 * the read below would; there the turn's insert goes in the same statement); otherwise the
 * clock is read (and locked) first.
 */
export async function appendTurnIfSessionExists(trx: Transaction<DB>, dialect: Dialect, turn: NewTurn): Promise<AppendedTurn | null> {
  const { sessionId, role, text } = turn;
  const error = turn.error ?? null;
  const jobId = turn.jobId ?? null;
  const now = nextTs(null);
  let ts: string | null = now;
  if (dialect === 'postgres') {
    const [inserted] = await advanceClockIfBehindAndInsertTurn(trx, sessionId, now, role, text, error, jobId);
    if (inserted) return { id: Number(inserted.id), ts: now };
    ts = await advanceClockAfterReading(trx, dialect, sessionId);
  } else if ((await advanceClockIfBehind.affected(trx, sessionId, now)) !== 1) {
    ts = await advanceClockAfterReading(trx, dialect, sessionId);
  }
  if (ts === null) return null;
  const [inserted] = await insertTurn(trx, sessionId, role, text, ts, error, jobId);
  return { id: Number(inserted!.id), ts };
}

/** The clock was not behind the present (or there is no clock, or no session): read (and lock) it, then move it. */
async function advanceClockAfterReading(trx: Transaction<DB>, dialect: Dialect, sessionId: string): Promise<string | null> {
  const [session] = await (dialect === 'postgres' ? sessionClockForUpdate : sessionClock)(trx, sessionId);
  if (!session) return null;
  const ts = nextTs(session.last_ts);
  await advanceClock.affected(trx, sessionId, ts);
  return ts;
}

/** Creates a session with its first turn: its clock starts at that turn, nothing to read or lock. */
export async function startSession(
  trx: Transaction<DB>,
  dialect: Dialect,
  session: { id: string; userId: string; agentId: string; channel: string },
  turn: { role: TurnRole; text: string },
): Promise<AppendedTurn> {
  const ts = nextTs(null);
  const createdAt = new Date().toISOString();
  if (dialect === 'postgres') {
    const [inserted] = await insertSessionAndTurn(trx, session.id, session.userId, session.agentId, session.channel, ts, createdAt, turn.role, turn.text);
    return { id: Number(inserted!.id), ts };
  }
  await insertSession.affected(trx, session.id, session.userId, session.agentId, session.channel, ts, createdAt);
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
