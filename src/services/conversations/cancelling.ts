import { z } from 'zod';
import { Problem } from '../../domain/problems.ts';
import { cancelJob, openJobsOfSession } from '../../engine/queue-sql.ts';
import type { TurnEngine } from '../../engine/turn-engine.ts';
import type { UnitOfWork } from '../../engine/unit-of-work.ts';
import type { Store } from '../../store/store.ts';
import { closeMissions, LIVE_MISSION } from '../missions/lifecycle.ts';
import { writeCancelledTurn } from '../turns.ts';
import { findOwnSession } from './transcripts.ts';

export const CancelResultSchema = z.object({
  session_id: z.string(),
  cancelled: z.number().int().meta({ description: 'Messages cancelled: queued ones taken out of the agent\'s line, and the running one. 0 when nothing was queued or running.' }),
}).meta({ id: 'CancelResult' });
export type CancelResult = z.infer<typeof CancelResultSchema>;

/**
 * §9.4: stops a session's work in one transaction. Each open job ends as cancelled (a message
 * with a `Cancelled.` turn and a `turn.cancelled` event); the instance running one hears of it
 * through the bus and aborts the run, whose outcome it can no longer write; a send waiting for
 * one wakes to its `Cancelled.` turn. The session's live missions close with what they wait on.
 */
export async function cancelSession(deps: { store: Store; engine: TurnEngine }, userId: string, sessionId: string): Promise<CancelResult> {
  const session = await findOwnSession(deps.store.db, userId, sessionId);
  if (!session) throw new Problem('session_not_found', 'No such session.');
  const { dialect } = deps.store;
  return deps.engine.transact(async (tx) => {
    const jobs = await openJobsOfSession(tx.db, dialect, session.id);
    const messageTs = await tsOfTurns(tx, jobs.flatMap((job) => (job.kind === 'message' && job.user_turn_id !== null ? [job.user_turn_id] : [])));
    let cancelled = 0;
    for (const job of jobs) {
      const reply = job.kind === 'message' ? await writeCancelledTurn(tx, dialect, job, messageTs.get(job.user_turn_id!) ?? '') : null;
      // Read open under the transaction's lock: a job that is not open now means the queue
      // changed under it, and the cancel stops rather than leave a message neither cancelled nor told.
      if (!(await cancelJob(tx.db, job.id, reply?.id ?? null, deps.store.clock.now()))) {
        throw new Error(`job ${job.id} of session ${session.id} could not be cancelled: it was no longer open`);
      }
      if (job.status === 'running') await tx.publish({ type: 'job_cancelled', jobId: job.id });
      await tx.publish({ type: 'job_done', jobId: job.id });
      if (job.kind === 'message') cancelled++;
    }
    const missions = await tx.db.selectFrom('missions').select('id')
      .where('session_id', '=', session.id).where('status', 'in', LIVE_MISSION).execute();
    await closeMissions(tx, dialect, missions.map((m) => m.id), 'cancelled');
    if (cancelled > 0) await tx.publish({ type: 'session_turn', sessionId: session.id });
    return { session_id: session.id, cancelled };
  });
}

/** The ts of each of these turns, by id, in one read. */
async function tsOfTurns(tx: UnitOfWork, turnIds: number[]): Promise<Map<number, string>> {
  if (turnIds.length === 0) return new Map();
  const rows = await tx.db.selectFrom('turns').select(['id', 'ts']).where('id', 'in', turnIds).execute();
  return new Map(rows.map((row) => [Number(row.id), row.ts]));
}
