import type { Transaction } from 'kysely';
import { looksLikeId } from '../../domain/ids.ts';
import type { UnitOfWork } from '../../engine/unit-of-work.ts';
import type { Action, DB } from '../../store/schema.ts';
import { localIsoNow } from '../clock.ts';
import { closeIfOrphaned, continueMission, LIVE_MISSION, lockActionsInIdOrder, type MissionsDeps } from './lifecycle.ts';
import { type Decision, DecisionEntrySchema, type DecisionResult, type DecisionResults, stringField } from './schemas.ts';

const NO_ACTION = 'No pending action with this operation_id.';

/**
 * §5: one result per entry, in order; entries are settled one after the other. A decision
 * settles its action with a conditional update (so of two racing requests exactly one wins)
 * and, in the same transaction, enqueues the mission's continuation.
 */
export async function decide(deps: MissionsDeps, userId: string, entries: readonly unknown[]): Promise<DecisionResults> {
  const results: DecisionResult[] = [];
  for (const entry of entries) results.push(await decideOne(deps, userId, entry));
  return { results };
}

/**
 * How one of the caller's actions was settled, so that a decision that came too late can say
 * so ("already approved"): null while it is pending, and for an action that is not the caller's.
 */
export async function settledAction(
  deps: MissionsDeps, userId: string, operationId: string,
): Promise<{ summary: string; outcome: 'approved' | 'rejected' | 'closed' } | null> {
  if (!looksLikeId('action', operationId)) return null;
  const action = await deps.store.db.selectFrom('actions').select(['summary', 'status'])
    .where('id', '=', operationId).where('owner_user_id', '=', userId).executeTakeFirst();
  if (!action || action.status === 'pending') return null;
  // Approved actions go on to executing, done or failed; a closed one was never decided.
  const outcome = action.status === 'rejected' ? 'rejected' : action.status === 'closed' || action.status === 'cancelled' ? 'closed' : 'approved';
  return { summary: action.summary, outcome };
}

async function decideOne(deps: MissionsDeps, userId: string, entry: unknown): Promise<DecisionResult> {
  const parsed = DecisionEntrySchema.safeParse(entry);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    return { operation_id: stringField(entry, 'operation_id'), ok: false, error: { code: 'invalid_decision', message: `${where}${issue.message}` } };
  }
  const { operation_id: operationId, decision } = parsed.data;
  // Only a rejection keeps its reason (the agent re-plans around it); an approval ignores it.
  const reason = decision === 'reject' ? parsed.data.reason?.trim() || null : null;
  const notFound: DecisionResult = { operation_id: operationId, ok: false, error: { code: 'not_found', message: NO_ACTION } };
  const alreadySettled: DecisionResult = {
    operation_id: operationId, ok: false, error: { code: 'already_settled', message: 'This action was already approved or rejected.' },
  };

  if (!looksLikeId('action', operationId)) return notFound;
  const action = await deps.store.db.selectFrom('actions').selectAll()
    .where('id', '=', operationId).where('owner_user_id', '=', userId).executeTakeFirst();
  if (!action) return notFound;
  if (await closeIfOrphaned(deps, action.mission_id)) return notFound;
  if (action.status === 'closed') return notFound;
  if (action.status === 'cancelled') return cancelled(operationId);
  if (action.status !== 'pending') return alreadySettled;

  return deps.engine.transact(async (tx) => {
    const approve = decision !== 'reject';
    // Same kind, same agent, the caller's own; sessions that are gone are left to orphan-closing.
    const siblings = decision !== 'approve_same_type' ? [] : await tx.db.selectFrom('actions')
      .innerJoin('sessions', 'sessions.id', 'actions.session_id')
      .innerJoin('missions', 'missions.id', 'actions.mission_id')
      .selectAll('actions')
      .where('actions.owner_user_id', '=', userId).where('actions.agent_id', '=', action.agent_id)
      .where('actions.kind', '=', action.kind).where('actions.status', '=', 'pending')
      .where('actions.id', '!=', action.id).where('missions.status', 'in', LIVE_MISSION)
      .orderBy('actions.created_at').orderBy('actions.id')
      .execute();
    // Two bulk approvals over overlapping sets would deadlock if each locked in its own order.
    await lockActionsInIdOrder(tx.db, deps.store.dialect, [action.id, ...siblings.map((a) => a.id)]);

    if (!(await settleAction(tx.db, action.id, approve ? 'approved' : 'rejected', decision, reason))) {
      const now = await tx.db.selectFrom('actions').select('status').where('id', '=', action.id).executeTakeFirst();
      if (now?.status === 'cancelled') return cancelled(operationId);
      return now?.status === 'closed' ? notFound : alreadySettled;
    }
    await continueMission(tx, deps.store, action, approve
      ? { kind: 'action_approved', missionId: action.mission_id, operationId: action.id }
      : { kind: 'action_rejected', missionId: action.mission_id, operationId: action.id, reason });
    await tellSettled(tx, action, approve ? 'approved' : 'rejected');
    const alsoApproved: string[] = [];
    for (const sibling of siblings) {
      if (!(await settleAction(tx.db, sibling.id, 'approved', decision, null))) continue;
      await continueMission(tx, deps.store, sibling, { kind: 'action_approved', missionId: sibling.mission_id, operationId: sibling.id });
      await tellSettled(tx, sibling, 'approved');
      alsoApproved.push(sibling.id);
    }
    return { operation_id: operationId, ok: true, outcome: approve ? 'approved' : 'rejected', also_approved: alsoApproved } satisfies DecisionResult;
  });
}

/** An action its session's cancel settled (§9.4): already settled, and saying by what. */
const cancelled = (operationId: string): DecisionResult => ({
  operation_id: operationId, ok: false, error: { code: 'already_settled', message: 'This action was closed without a decision: its session\'s work was cancelled.' },
});

/** The owner's feed hears that the action is settled (§9.3 `action.settled`). */
function tellSettled(tx: UnitOfWork, action: Action, outcome: 'approved' | 'rejected'): Promise<void> {
  return tx.publish({
    type: 'action.settled', sessionId: action.session_id, agentId: action.agent_id, recipients: [action.owner_user_id],
    data: { operation_id: action.id, outcome },
  });
}

/** The one conditional update that decides a race: only a pending action changes. */
async function settleAction(
  trx: Transaction<DB>, id: string, status: 'approved' | 'rejected', decision: Decision, reason: string | null,
): Promise<boolean> {
  const result = await trx.updateTable('actions').set({ status, decision, reason, decided_at: localIsoNow() })
    .where('id', '=', id).where('status', '=', 'pending').executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
