import type { Kysely, Transaction } from 'kysely';
import { nextTs } from '../../domain/turn-clock.ts';
import type { DB, TurnRole } from '../schema.ts';
import { prepared } from '../prepared.ts';
import type { Dialect } from '../store.ts';

export interface AppendedTurn {
  id: number;
  ts: string;
}

/**
 * Appends a turn to a session with the next ts of its clock. The session row is locked
 * (PostgreSQL) for the rest of the transaction, so turns of one session commit in ts order
 * and a reader paging with `after` never skips one.
 */
export async function appendTurn(
  trx: Transaction<DB>,
  dialect: Dialect,
  turn: { sessionId: string; role: TurnRole; text: string; error?: string | null; jobId?: number | null },
): Promise<AppendedTurn> {
  const session = await trx.selectFrom('sessions').select('last_ts').where('id', '=', turn.sessionId)
    .$if(dialect === 'postgres', (q) => q.forUpdate()).executeTakeFirstOrThrow();
  const ts = nextTs(session.last_ts);
  const inserted = await trx.insertInto('turns').values({
    session_id: turn.sessionId, role: turn.role, text: turn.text, ts, error: turn.error ?? null, job_id: turn.jobId ?? null,
  }).returning('id').executeTakeFirstOrThrow();
  await trx.updateTable('sessions').set({ last_ts: ts }).where('id', '=', turn.sessionId).execute();
  return { id: Number(inserted.id), ts };
}

export interface TranscriptPage {
  messages: { role: TurnRole; text: string; ts: string; error?: string }[];
  hasMore: boolean;
}

// Every poll runs one of these: built once (see ../prepared.ts).
const firstTurns = prepared((db, sessionId: string, limit: number) => db.selectFrom('turns').select(['role', 'text', 'ts', 'error'])
  .where('session_id', '=', sessionId).orderBy('ts').limit(limit));
const turnsAfter = prepared((db, sessionId: string, after: string, limit: number) => db.selectFrom('turns').select(['role', 'text', 'ts', 'error'])
  .where('session_id', '=', sessionId).where('ts', '>', after).orderBy('ts').limit(limit));

/** Turns after `after` (exclusive), oldest first, at most `limit`. */
export async function readTranscript(db: Kysely<DB>, sessionId: string, after: string | null, limit: number): Promise<TranscriptPage> {
  const rows = after === null ? await firstTurns(db, sessionId, limit + 1) : await turnsAfter(db, sessionId, after, limit + 1);
  const hasMore = rows.length > limit;
  const messages = rows.slice(0, limit).map((r) => (r.error ? { role: r.role, text: r.text, ts: r.ts, error: r.error } : { role: r.role, text: r.text, ts: r.ts }));
  return { messages, hasMore };
}
