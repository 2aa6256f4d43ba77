import type { Brain, BrainInput, BrainResult } from '../brains/brain.ts';
import { BrainFailure } from '../brains/brain.ts';
import { noToolReply, type ToolRegistry } from '../brains/tools.ts';
import { newId } from '../domain/ids.ts';
import { enqueueJob, isOpen } from '../engine/queue-sql.ts';
import type { UnitOfWork } from '../engine/unit-of-work.ts';
import type { Finisher, JobHandler } from '../engine/turn-engine.ts';
import type { Job } from '../store/schema.ts';
import type { Store } from '../store/store.ts';
import { isoNowOf } from '../store/shared-clock.ts';
import { localIsoNow } from './clock.ts';
import { writeAgentTurn } from './turns.ts';
import { type ContinuationPayload, type JobPayload, payloadOf } from './missions/job-payload.ts';
import { settleMission } from './missions/lifecycle.ts';

export const AGENT_FAILED_TEXT = 'The agent could not process this message.';

/** How many of the session's latest turns a brain is given as the conversation so far (BrainContext.history). */
const HISTORY_TURNS = 50;

/**
 * Runs one unit of work through the brain and writes its outcome: the agent turn, and any
 * action or question that suspends the mission. Everything is written in the engine's
 * finishing transaction, so it lands exactly once. A drafted action whose tool needs no
 * permission is recorded approved, with its continuation enqueued in that same transaction: it
 * runs exactly as an approved action does (executing, then done, crash-safe).
 */
export class TurnWorker implements JobHandler {
  private readonly store: Store;
  private readonly brain: Brain;
  private readonly tools: ToolRegistry;

  constructor(deps: { store: Store; brain: Brain; tools: ToolRegistry }) {
    this.store = deps.store;
    this.brain = deps.brain;
    this.tools = deps.tools;
  }

  async run(job: Job, signal: AbortSignal): Promise<Finisher> {
    const payload = payloadOf(job);
    const input = await this.brainInput(payload);
    if (!input) return this.closeMission(job, payload); // its action, question or mission is gone
    if (payload.kind === 'action_approved') {
      // Marked before it runs: after a crash here the retry sees "executing" and runs it again
      // under the same operation_id (the tool's idempotency key).
      const marked = await this.store.db.updateTable('actions').set({ status: 'executing' })
        .where('id', '=', payload.operationId).where('status', 'in', ['approved', 'executing']).executeTakeFirst();
      // Closed since brainInput read it (the orphan sweep): the tool must not run.
      if (Number(marked.numUpdatedRows) !== 1) return this.closeMission(job, payload);
    }
    let result = await this.brain.respond(input, this.context(job, signal));
    if (result.action && !this.tools.get(result.action.kind)) {
      // A kind no tool can run is refused as it is drafted, not only once someone approved it.
      const { action, ...rest } = result;
      result = { ...rest, reply: noToolReply(action.kind) };
    }
    const recorded = result;
    return (tx) => this.record(tx, job, payload, recorded);
  }

  failure(job: Job, error: unknown): Finisher {
    const payload = payloadOf(job);
    const detail = error instanceof BrainFailure ? error.message : AGENT_FAILED_TEXT;
    return async (tx) => {
      // The session may be gone (that may be why the job failed): then there is no turn to write,
      // but the action and the mission still reach a final state.
      const turn = await writeAgentTurn(tx, this.store.dialect, job, detail, 'agent_failed');
      if (payload.kind === 'action_approved') {
        await tx.db.updateTable('actions').set({ status: 'failed' })
          .where('id', '=', payload.operationId).where('status', 'in', ['approved', 'executing']).execute();
      }
      if (payload.kind !== 'message') await settleMission(tx.db, this.store.dialect, payload.missionId, 'stopped', job.id);
      return { status: 'failed', replyTurnId: turn?.id ?? null };
    };
  }

  private async brainInput(payload: JobPayload): Promise<BrainInput | null> {
    if (payload.kind === 'message') return { kind: 'message', text: payload.text };
    const mission = await this.store.db.selectFrom('missions').select('status').where('id', '=', payload.missionId).executeTakeFirst();
    const missionClosed = !mission || mission.status === 'closed'; // closed: nobody can settle it any more
    if (payload.kind === 'question_answered') {
      const q = await this.store.db.selectFrom('questions').selectAll().where('id', '=', payload.requestId).executeTakeFirst();
      if (!q || q.status === 'closed' || q.status === 'cancelled' || missionClosed) return null;
      return { kind: 'question_answered', question: { requestId: q.id, text: q.text, answerType: q.answer_type }, answer: payload.answer };
    }
    const a = await this.store.db.selectFrom('actions').selectAll().where('id', '=', payload.operationId).executeTakeFirst();
    if (!a || a.status === 'closed' || a.status === 'cancelled') return null;
    // An action already executing (its runner died mid-run) is left to finish, even on a closed mission.
    if (missionClosed && !(payload.kind === 'action_approved' && a.status === 'executing')) return null;
    const action = { operationId: a.id, kind: a.kind, summary: a.summary, details: JSON.parse(a.details) as Record<string, unknown> };
    return payload.kind === 'action_approved' ? { kind: 'action_approved', action } : { kind: 'action_rejected', action, reason: payload.reason };
  }

  private context(job: Job, signal: AbortSignal) {
    const db = this.store.db;
    return {
      jobId: job.id,
      agentId: job.agent_id,
      sessionId: job.session_id,
      senderUserId: job.user_id,
      signal,
      // Messages queued behind this unit of work (a message or a continuation) are not part of its
      // history yet (the replies written so far are): user turns from the first one on are left out.
      history: async () => {
        const behind = await db.selectFrom('jobs').select((eb) => eb.fn.min('user_turn_id').as('first'))
          .where('session_id', '=', job.session_id).where(isOpen).where('id', '>', job.id)
          .executeTakeFirst();
        const firstBehind = behind?.first == null ? null : Number(behind.first);
        return (await db.selectFrom('turns').select(['role', 'text']).where('session_id', '=', job.session_id)
          .$if(firstBehind !== null, (q) => q.where((eb) => eb.or([eb('role', '=', 'agent'), eb('id', '<', firstBehind!)])))
          .orderBy('ts', 'desc').limit(HISTORY_TURNS).execute()).reverse();
      },
      newOperationId: () => newId('action'),
      newRequestId: () => newId('question'),
      findWorkspaceMember: async (email: string) => {
        const row = await db.selectFrom('users')
          .innerJoin('memberships', 'memberships.user_id', 'users.id')
          .innerJoin('agents', 'agents.workspace_id', 'memberships.workspace_id')
          .select('users.id').where('agents.id', '=', job.agent_id).where('users.email', '=', email.trim().toLowerCase())
          .executeTakeFirst();
        return row ? { userId: row.id } : null;
      },
      runTool: async (action: { operationId: string; kind: string; summary: string; details: Record<string, unknown> }) => {
        const tool = this.tools.get(action.kind);
        if (!tool) throw new BrainFailure(`No tool can run actions of kind "${action.kind}".`);
        await tool.run(action, action.operationId, signal);
      },
      toolFor: (kind: string) => {
        const tool = this.tools.get(kind);
        return tool ? { needsPermission: tool.needsPermission } : null;
      },
    };
  }

  private async record(tx: UnitOfWork, job: Job, payload: JobPayload, result: BrainResult) {
    // By the shared clock: pending actions and open questions are listed oldest first, whichever instance drafted them.
    const now = isoNowOf(this.store.clock);
    const turn = await writeAgentTurn(tx, this.store.dialect, job, result.reply);
    if (!turn) throw new Error(`session ${job.session_id} does not exist`);
    if (payload.kind === 'action_approved') {
      await tx.db.updateTable('actions').set({ status: 'done' })
        .where('id', '=', payload.operationId).where('status', 'in', ['approved', 'executing']).execute();
    }
    let missionId = payload.kind === 'message' ? null : payload.missionId;
    if (result.action || result.question) {
      if (!missionId) {
        missionId = newId('mission');
        await tx.db.insertInto('missions').values({
          id: missionId, session_id: job.session_id, agent_id: job.agent_id, owner_user_id: job.user_id,
          status: 'waiting', created_at: now, updated_at: now,
        }).execute();
        await this.recordDrafts(tx, job, missionId, result, now);
      } else {
        const mission = await tx.db.selectFrom('missions').select('status').where('id', '=', missionId)
          .$if(this.store.dialect === 'postgres', (q) => q.forUpdate()).executeTakeFirst();
        // Nothing new is drafted into a mission that was closed meanwhile: nobody could settle it.
        if (mission && mission.status !== 'closed') await this.recordDrafts(tx, job, missionId, result, now);
      }
    }
    if (missionId) {
      const stopped = payload.kind === 'action_rejected' && !payload.reason;
      await settleMission(tx.db, this.store.dialect, missionId, stopped ? 'stopped' : 'done', job.id);
    }
    return { status: 'done' as const, replyTurnId: turn.id, reply: { text: result.reply, ts: turn.ts } };
  }

  /** The action and question a unit of work drafted, in its mission. */
  private async recordDrafts(tx: UnitOfWork, job: Job, missionId: string, result: BrainResult, now: string) {
    const common = { mission_id: missionId, session_id: job.session_id, agent_id: job.agent_id, owner_user_id: job.user_id, created_at: now };
    if (result.action) {
      const a = result.action;
      const needsPermission = this.tools.get(a.kind)?.needsPermission !== false;
      await tx.db.insertInto('actions').values({
        ...common, id: a.operationId, kind: a.kind, summary: a.summary, details: JSON.stringify(a.details),
        status: needsPermission ? 'pending' : 'approved', decision: null, reason: null, decided_at: needsPermission ? null : now,
      }).execute();
      if (needsPermission) {
        await tx.publish({
          type: 'action.pending', sessionId: job.session_id, agentId: job.agent_id, recipients: [job.user_id],
          data: { operation_id: a.operationId, kind: a.kind, summary: a.summary },
        });
      }
      if (!needsPermission) {
        // Nobody is asked: its continuation goes into the agent's line now, as an approval's would.
        await enqueueJob(tx, this.store, {
          agentId: job.agent_id, sessionId: job.session_id, userId: job.user_id, kind: 'continuation', userTurnId: null,
          payload: { kind: 'action_approved', missionId, operationId: a.operationId } satisfies ContinuationPayload,
        });
      }
    }
    if (result.question) {
      const q = result.question;
      const askedOf = q.askedOfUserId ?? job.user_id;
      await tx.db.insertInto('questions').values({
        ...common, id: q.requestId, asked_of: askedOf, text: q.text, answer_type: q.answerType,
        status: 'open', answer: null, answered_at: null,
      }).execute();
      await tx.publish({
        type: 'question.opened', sessionId: job.session_id, agentId: job.agent_id, recipients: [job.user_id, askedOf],
        data: { request_id: q.requestId, text: q.text, answer_type: q.answerType, asked_of: askedOf },
      });
    }
  }

  /** A continuation whose action, question or mission was removed or closed: close the mission, say so once. */
  private closeMission(job: Job, payload: JobPayload): Finisher {
    return async (tx) => {
      const turn = await writeAgentTurn(tx, this.store.dialect, job, 'This task was closed: what it waited for no longer exists.');
      if (payload.kind === 'action_approved') {
        await tx.db.updateTable('actions').set({ status: 'closed' }).where('id', '=', payload.operationId).where('status', '=', 'approved').execute();
      }
      if (payload.kind !== 'message') {
        await tx.db.updateTable('missions').set({ status: 'closed', updated_at: localIsoNow() }).where('id', '=', payload.missionId).execute();
      }
      return { status: 'done', replyTurnId: turn?.id ?? null };
    };
  }
}
