import type { UnitOfWork } from '../engine/unit-of-work.ts';
import type { Dialect } from '../store/dialect.ts';
import { appendTurn, appendTurnIfSessionExists, type AppendedTurn } from '../store/repos/transcript.ts';
import type { Job } from '../store/schema.ts';

/**
 * An agent turn written for a unit of work, and told: the session's held reads wake (§9.1), and
 * its owner's feed records `turn.completed`, or `turn.failed` for a turn with an `error` (§9.3).
 * Null when the session is gone (there is no transcript to write to).
 */
export async function writeAgentTurn(
  tx: UnitOfWork, dialect: Dialect, job: Pick<Job, 'id' | 'session_id' | 'agent_id' | 'user_id'>, text: string, error: string | null = null,
): Promise<AppendedTurn | null> {
  const turn = await appendTurnIfSessionExists(tx.db, dialect, { sessionId: job.session_id, role: 'agent', text, error, jobId: job.id });
  if (!turn) return null;
  await tx.publish({ type: 'session_turn', sessionId: job.session_id });
  const about = { sessionId: job.session_id, agentId: job.agent_id, recipients: [job.user_id] };
  await tx.publish(error === null
    ? { ...about, type: 'turn.completed', data: { text, ts: turn.ts } }
    : { ...about, type: 'turn.failed', data: { text, ts: turn.ts, error } });
  return turn;
}

/** The text of the agent turn that answers a cancelled message (§9.4). */
export const CANCELLED_TEXT = 'Cancelled.';

/**
 * A cancelled message's `Cancelled.` agent turn (`"error": "cancelled"`), written for a unit of
 * work, and its owner's feed records `turn.cancelled` with the message's ts (§9.3, §9.4), not
 * `turn.failed`. The session's held reads are the caller's to wake, once for all its turns.
 */
export async function writeCancelledTurn(
  tx: UnitOfWork, dialect: Dialect, job: Pick<Job, 'id' | 'session_id' | 'agent_id' | 'user_id'>, messageTs: string,
): Promise<AppendedTurn> {
  const turn = await appendTurn(tx.db, dialect, { sessionId: job.session_id, role: 'agent', text: CANCELLED_TEXT, error: 'cancelled', jobId: job.id });
  await tx.publish({ type: 'turn.cancelled', sessionId: job.session_id, agentId: job.agent_id, recipients: [job.user_id], data: { ts: messageTs } });
  return turn;
}
