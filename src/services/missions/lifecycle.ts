import type { Kysely, Transaction } from 'kysely';
import { enqueueJob, openContinuationPayloads } from '../../engine/queue-sql.ts';
import type { TurnEngine } from '../../engine/turn-engine.ts';
import type { UnitOfWork } from '../../engine/unit-of-work.ts';
import type { Action, DB, MissionStatus, Question } from '../../store/schema.ts';
import type { Dialect } from '../../store/dialect.ts';
import type { Store } from '../../store/store.ts';
import { localIsoNow } from '../clock.ts';
import type { ContinuationPayload } from './job-payload.ts';

/**
 * A mission's life: active while a continuation of it is queued or running, waiting while
 * something in it waits for a person, then done or stopped; closed when nobody can settle it
 * any more (its session or agent is gone, or its owner left the agent's workspace).
 */

/** Missions still able to move on: those that orphan-closing looks at. */
export const LIVE_MISSION = ['waiting', 'active'] as const;

/** What the missions' reads and units of work go through. */
export interface MissionsDeps {
  store: Store;
  engine: TurnEngine;
}

/**
 * Where a mission stands once one of its units of work has been recorded: it ends (`ending`:
 * done, or stopped) only when nothing in it is still open, that is no pending action, no open
 * question and no other continuation queued or running (`exceptJobId` is the one finishing now).
 * Otherwise it is active (a continuation will run) or waiting (on a person). A closed mission
 * never changes. With `onlyIf`, a mission in any other status is left as it is. Returns the
 * mission's status, or null when there is no such mission or it was left.
 */
export async function settleMission(
  trx: Transaction<DB>, dialect: Dialect, missionId: string, ending: 'done' | 'stopped', exceptJobId: number | null,
  onlyIf?: MissionStatus,
): Promise<MissionStatus | null> {
  const mission = await trx.selectFrom('missions').select(['status', 'session_id']).where('id', '=', missionId)
    .$if(dialect === 'postgres', (q) => q.forUpdate()).executeTakeFirst();
  if (!mission) return null;
  if (mission.status === 'closed') return 'closed';
  if (onlyIf !== undefined && mission.status !== onlyIf) return null;
  let status: MissionStatus = ending;
  const continuations = await openContinuations(trx, mission.session_id, exceptJobId);
  if (continuations.some((p) => p.missionId === missionId)) {
    status = 'active';
  } else {
    const pending = await trx.selectFrom('actions').select('id').where('mission_id', '=', missionId).where('status', '=', 'pending')
      .limit(1).executeTakeFirst();
    const open = pending ?? await trx.selectFrom('questions').select('id').where('mission_id', '=', missionId).where('status', '=', 'open')
      .limit(1).executeTakeFirst();
    if (open) status = 'waiting';
  }
  await trx.updateTable('missions').set({ status, updated_at: localIsoNow() }).where('id', '=', missionId).where('status', '!=', 'closed').execute();
  return status;
}

/** Enqueues a mission's next unit of work; it runs as the mission's owner, in the agent's FIFO line. */
export async function continueMission(tx: UnitOfWork, store: Store, on: Action | Question, payload: ContinuationPayload): Promise<void> {
  // The mission row before the agent's line: the order the finishing transaction takes them in.
  await tx.db.updateTable('missions').set({ status: 'active', updated_at: localIsoNow() })
    .where('id', '=', on.mission_id).where('status', '!=', 'closed').execute();
  await enqueueJob(tx, store, { agentId: on.agent_id, sessionId: on.session_id, userId: on.owner_user_id, kind: 'continuation', payload, userTurnId: null });
}

/** PostgreSQL row locks taken in one global order (SQLite runs one write transaction at a time). */
export async function lockActionsInIdOrder(trx: Transaction<DB>, dialect: Dialect, ids: string[]): Promise<void> {
  if (dialect !== 'postgres' || ids.length < 2) return;
  await trx.selectFrom('actions').select('id').where('id', 'in', ids).orderBy('id').forUpdate().execute();
}

/** Missions, whatever their status, whose session or agent is gone or whose owner is no longer a member of the agent's workspace. */
function orphanedMissions(db: Kysely<DB>) {
  return db.selectFrom('missions')
    .leftJoin('sessions', 'sessions.id', 'missions.session_id')
    .leftJoin('agents', 'agents.id', 'missions.agent_id')
    .leftJoin('memberships', (join) => join
      .onRef('memberships.workspace_id', '=', 'agents.workspace_id').onRef('memberships.user_id', '=', 'missions.owner_user_id'))
    .select('missions.id')
    .where((eb) => eb.or([eb('sessions.id', 'is', null), eb('agents.id', 'is', null), eb('memberships.user_id', 'is', null)]));
}

/**
 * No orphans: a live mission whose session or agent is gone, or whose owner is no longer a
 * member of the agent's workspace, can never be settled by anyone. Close it with its pending
 * actions and open questions so that it stops showing up in lists. Scoped to one mission, to
 * the missions a user owns or was asked on, or (no scope) every mission. Returns how many closed.
 */
export async function closeOrphanedMissions(deps: MissionsDeps, scope: { missionId?: string; involving?: string } = {}): Promise<number> {
  const orphans = await orphanedMissions(deps.store.db)
    .$if(scope.missionId !== undefined, (q) => q.where('missions.id', '=', scope.missionId!))
    // The caller's live missions, and those with a question still open for the caller (live:
    // a mission's questions close with it). Each branch names its own index; one condition on
    // the status of all missions would have SQLite read every live mission of every account.
    .where((eb) => (scope.involving === undefined ? eb('missions.status', 'in', LIVE_MISSION) : eb.or([
      eb.and([eb('missions.owner_user_id', '=', scope.involving), eb('missions.status', 'in', LIVE_MISSION)]),
      eb('missions.id', 'in', eb.selectFrom('questions').select('questions.mission_id')
        .where('questions.asked_of', '=', scope.involving).where('questions.status', '=', 'open')),
    ])))
    .execute();
  if (orphans.length === 0) return 0;
  const ids = orphans.map((o) => o.id);
  return deps.engine.transact((tx) => closeMissions(tx, deps.store.dialect, ids, 'closed'));
}

/**
 * Closes these missions, those still live, with what they wait on: their pending and approved
 * actions and their open questions (an action already executing is left to finish), as `closed`
 * (nobody can settle them any more: to whoever tries, they are not found) or `cancelled` (their
 * session was cancelled: they were settled, by the cancel). A pending action is told as settled
 * (`cancelled`), a question as closed. Actions, then questions, then the missions: the order
 * every settling transaction locks in. Returns how many missions closed.
 */
export async function closeMissions(tx: UnitOfWork, dialect: Dialect, missionIds: string[], status: 'closed' | 'cancelled'): Promise<number> {
  if (missionIds.length === 0) return 0;
  const closable = await tx.db.selectFrom('actions').select('id')
    .where('mission_id', 'in', missionIds).where('status', 'in', ['pending', 'approved']).execute();
  await lockActionsInIdOrder(tx.db, dialect, closable.map((a) => a.id));
  // The rows this transaction changed, as they were: only those are told (a decision may have come first).
  const actions = await tx.db.updateTable('actions').set({ status })
    .where('mission_id', 'in', missionIds).where('status', 'in', ['pending', 'approved'])
    .returning(['id', 'session_id', 'agent_id', 'owner_user_id', 'decided_at']).execute();
  for (const action of actions) {
    if (action.decided_at !== null) continue; // approved already: it was settled then
    await tx.publish({
      type: 'action.settled', sessionId: action.session_id, agentId: action.agent_id, recipients: [action.owner_user_id],
      data: { operation_id: action.id, outcome: 'cancelled' },
    });
  }
  const questions = await tx.db.updateTable('questions').set({ status })
    .where('mission_id', 'in', missionIds).where('status', '=', 'open')
    .returning(['id', 'session_id', 'agent_id', 'owner_user_id', 'asked_of']).execute();
  for (const question of questions) {
    await tx.publish({
      type: 'question.closed', sessionId: question.session_id, agentId: question.agent_id,
      recipients: [question.owner_user_id, question.asked_of], data: { request_id: question.id },
    });
  }
  const closed = await tx.db.updateTable('missions').set({ status: 'closed', updated_at: localIsoNow() })
    .where('id', 'in', missionIds).where('status', 'in', LIVE_MISSION).executeTakeFirst();
  return Number(closed.numUpdatedRows);
}

/** Whether the mission was orphaned, and is closed now. */
export async function closeIfOrphaned(deps: MissionsDeps, missionId: string): Promise<boolean> {
  return (await closeOrphanedMissions(deps, { missionId })) > 0;
}

/**
 * The periodic sweep (the housekeeping's): every orphaned mission closed, then actions and
 * missions nothing will ever finish settled. Says how many of each.
 */
export async function sweepMissions(deps: MissionsDeps): Promise<{ orphansClosed: number; actionsFailed: number; missionsSettled: number }> {
  const orphansClosed = await closeOrphanedMissions(deps);
  const { db } = deps.store;
  // Rows before jobs: an action is approved, and a mission made active, in the transaction that
  // enqueues its continuation, so a continuation not open now never will be again.
  const inFlight = await db.selectFrom('actions').select(['id', 'mission_id'])
    .where('status', 'in', ['approved', 'executing']).execute();
  const active = await db.selectFrom('missions').select('id').where('status', '=', 'active').execute();
  if (inFlight.length === 0 && active.length === 0) return { orphansClosed, actionsFailed: 0, missionsSettled: 0 };
  const open = await openContinuationTargets(db);
  const actionsFailed = await failStrandedActions(deps, inFlight.filter((action) => !open.operations.has(action.id)));
  const missionsSettled = await settleStrandedMissions(deps, active.filter((mission) => !open.missions.has(mission.id)));
  return { orphansClosed, actionsFailed, missionsSettled };
}

/**
 * An approved action is settled by its continuation (done, or failed) in the transaction that
 * finishes that job. Only a runner that could not write even the failure (the engine's last
 * resort) leaves one approved or executing with its job finished: nothing would ever finish it,
 * so it is marked failed and its mission settled. Returns how many.
 */
async function failStrandedActions(deps: MissionsDeps, stranded: Array<{ id: string; mission_id: string }>): Promise<number> {
  let failed = 0;
  for (const action of stranded) {
    failed += await deps.engine.transact(async (tx) => {
      const updated = await tx.db.updateTable('actions').set({ status: 'failed' })
        .where('id', '=', action.id).where('status', 'in', ['approved', 'executing']).executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) return 0;
      await settleMission(tx.db, deps.store.dialect, action.mission_id, 'stopped', null);
      return 1;
    });
  }
  return failed;
}

/**
 * A mission is 'active' while a continuation of it is queued or running, and that
 * continuation settles it when it finishes. Only a runner that could not write even its
 * failure (the engine's last resort) leaves one 'active' with none: it is settled here as
 * stopped (or waiting, if something in it is still open). Returns how many.
 */
async function settleStrandedMissions(deps: MissionsDeps, stranded: Array<{ id: string }>): Promise<number> {
  let settled = 0;
  for (const { id } of stranded) {
    // Only if still active: its last continuation (or a stranded action above) may have settled it since.
    const status = await deps.engine.transact((tx) => settleMission(tx.db, deps.store.dialect, id, 'stopped', null, 'active'));
    if (status !== null && status !== 'active' && status !== 'closed') settled++;
  }
  return settled;
}

/** What every open continuation is for, in one read for a whole sweep. */
async function openContinuationTargets(db: Kysely<DB>): Promise<{ operations: Set<string>; missions: Set<string> }> {
  const operations = new Set<string>();
  const missions = new Set<string>();
  for (const payload of await openContinuations(db, null, null)) {
    missions.add(payload.missionId);
    if (payload.kind === 'action_approved') operations.add(payload.operationId);
  }
  return { operations, missions };
}

/** Continuations of a session's missions (of every session: null) still queued or running, other than `exceptJobId`. */
async function openContinuations(db: Kysely<DB>, sessionId: string | null, exceptJobId: number | null): Promise<ContinuationPayload[]> {
  // Read from continuation jobs only, which carry nothing but continuation payloads.
  return (await openContinuationPayloads(db, sessionId, exceptJobId)) as ContinuationPayload[];
}
