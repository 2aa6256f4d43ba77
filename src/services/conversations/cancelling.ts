import { z } from 'zod';
import { Problem } from '../../domain/problems.ts';
import { cancelJob, openJobsOfSession } from '../../engine/queue-sql.ts';
import type { TurnEngine } from '../../engine/turn-engine.ts';
import { appendTurn } from '../../store/repos/transcript.ts';
import type { Store } from '../../store/store.ts';
import { localIsoNow } from '../clock.ts';
import { closeWaitingItems, LIVE_MISSION } from '../missions/lifecycle.ts';
import { findOwnSession } from './transcripts.ts';

export const CancelResultSchema = z.object({
  session_id: z.string(),
  cancelled: z.number().int().meta({ description: 'Messages cancelled: queued ones taken out of the agent\'s line, and the running one. 0 when nothing was queued or running.' }),
}).meta({ id: 'CancelResult' });
export type CancelResult = z.infer<typeof CancelResultSchema>;

export const CANCELLED_TEXT = 'Cancelled.';

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
    let cancelled = 0;
    for (const job of await openJobsOfSession(tx.db, dialect, session.id)) {
      let replyTurnId: number | null = null;
      if (job.kind === 'message') {
        const turn = await appendTurn(tx.db, dialect, { sessionId: session.id, role: 'agent', text: CANCELLED_TEXT, error: 'cancelled', jobId: job.id });
        replyTurnId = turn.id;
      }
      if (!(await cancelJob(tx.db, job.id, replyTurnId, deps.store.clock.now()))) continue;
      if (job.status === 'running') await tx.publish({ type: 'job_cancelled', jobId: job.id });
      await tx.publish({ type: 'job_done', jobId: job.id });
      if (job.kind !== 'message') continue;
      cancelled++;
      const message = job.user_turn_id === null ? undefined
        : await tx.db.selectFrom('turns').select('ts').where('id', '=', job.user_turn_id).executeTakeFirst();
      await tx.publish({
        type: 'turn.cancelled', sessionId: session.id, agentId: session.agent_id, recipients: [session.user_id], data: { ts: message?.ts ?? '' },
      });
    }
    const missions = await tx.db.selectFrom('missions').select('id')
      .where('session_id', '=', session.id).where('status', 'in', LIVE_MISSION).execute();
    await closeWaitingItems(tx, dialect, missions.map((m) => m.id), 'cancelled');
    if (missions.length > 0) {
      await tx.db.updateTable('missions').set({ status: 'closed', updated_at: localIsoNow() })
        .where('id', 'in', missions.map((m) => m.id)).where('status', 'in', LIVE_MISSION).execute();
    }
    if (cancelled > 0) await tx.publish({ type: 'session_turn', sessionId: session.id });
    return { session_id: session.id, cancelled };
  });
}
