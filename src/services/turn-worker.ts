import type { Transaction } from 'kysely';
import type { Brain, BrainInput, BrainResult } from '../brains/brain.ts';
import { BrainFailure } from '../brains/brain.ts';
import type { ToolRegistry } from '../brains/tools.ts';
import { newId } from '../domain/ids.ts';
import type { Finisher, JobHandler } from '../engine/turn-engine.ts';
import { appendTurn } from '../store/repos/transcript.ts';
import type { DB, Job } from '../store/schema.ts';
import type { Store } from '../store/store.ts';
import { isoNow } from './clock.ts';

/** What a job carries: the brain input of one unit of work, and the mission it continues. */
export type JobPayload =
  | { kind: 'message'; text: string }
  | { kind: 'action_approved'; missionId: string; operationId: string }
  | { kind: 'action_rejected'; missionId: string; operationId: string; reason: string | null }
  | { kind: 'question_answered'; missionId: string; requestId: string; answer: string };

export const AGENT_FAILED_TEXT = 'The agent could not process this message.';

/**
 * Runs one unit of work through the brain and writes its outcome: the agent turn, and any
 * action or question that suspends the mission. Everything is written in the engine's
 * finishing transaction, so it lands exactly once.
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
    const payload = JSON.parse(job.payload) as JobPayload;
    const input = await this.brainInput(payload);
    if (!input) return this.closeMission(job, payload); // its action or question is gone
    if (payload.kind === 'action_approved') {
      // Marked before it runs: after a crash here the retry sees "executing" and runs it again
      // under the same operation_id (the tool's idempotency key).
      await this.store.db.updateTable('actions').set({ status: 'executing' })
        .where('id', '=', payload.operationId).where('status', 'in', ['approved', 'executing']).execute();
    }
    const result = await this.brain.respond(input, this.context(job, signal));
    return (trx) => this.record(trx, job, payload, result);
  }

  failure(job: Job, error: unknown): Finisher {
    const payload = JSON.parse(job.payload) as JobPayload;
    const detail = error instanceof BrainFailure ? error.message : AGENT_FAILED_TEXT;
    return async (trx) => {
      const turn = await appendTurn(trx, this.store.dialect, { sessionId: job.session_id, role: 'agent', text: detail, error: 'agent_failed', jobId: job.id });
      if (payload.kind !== 'message') {
        await trx.updateTable('missions').set({ status: 'stopped', updated_at: isoNow() }).where('id', '=', payload.missionId).execute();
      }
      return { status: 'failed', replyTurnId: turn.id };
    };
  }

  private async brainInput(payload: JobPayload): Promise<BrainInput | null> {
    if (payload.kind === 'message') return { kind: 'message', text: payload.text };
    if (payload.kind === 'question_answered') {
      const q = await this.store.db.selectFrom('questions').selectAll().where('id', '=', payload.requestId).executeTakeFirst();
      if (!q || q.status === 'closed') return null; // closed: its mission was orphaned
      return { kind: 'question_answered', question: { requestId: q.id, text: q.text, answerType: q.answer_type }, answer: payload.answer };
    }
    const a = await this.store.db.selectFrom('actions').selectAll().where('id', '=', payload.operationId).executeTakeFirst();
    if (!a || a.status === 'closed') return null;
    const action = { operationId: a.id, kind: a.kind, summary: a.summary, details: JSON.parse(a.details) as Record<string, unknown> };
    return payload.kind === 'action_approved' ? { kind: 'action_approved', action } : { kind: 'action_rejected', action, reason: payload.reason };
  }

  private context(job: Job, signal: AbortSignal) {
    const db = this.store.db;
    return {
      agentId: job.agent_id,
      sessionId: job.session_id,
      senderUserId: job.user_id,
      signal,
      history: async () => (await db.selectFrom('turns').select(['role', 'text']).where('session_id', '=', job.session_id)
        .orderBy('ts', 'desc').limit(50).execute()).reverse(),
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
    };
  }

  private async record(trx: Transaction<DB>, job: Job, payload: JobPayload, result: BrainResult) {
    const now = isoNow();
    const turn = await appendTurn(trx, this.store.dialect, { sessionId: job.session_id, role: 'agent', text: result.reply, jobId: job.id });
    if (payload.kind === 'action_approved') {
      await trx.updateTable('actions').set({ status: 'done' }).where('id', '=', payload.operationId).execute();
    }
    let missionId = payload.kind === 'message' ? null : payload.missionId;
    if (result.action || result.question) {
      if (!missionId) {
        missionId = newId('mission');
        await trx.insertInto('missions').values({
          id: missionId, session_id: job.session_id, agent_id: job.agent_id, owner_user_id: job.user_id,
          status: 'waiting', created_at: now, updated_at: now,
        }).execute();
      } else {
        await trx.updateTable('missions').set({ status: 'waiting', updated_at: now }).where('id', '=', missionId).execute();
      }
      const common = { mission_id: missionId, session_id: job.session_id, agent_id: job.agent_id, owner_user_id: job.user_id, created_at: now };
      if (result.action) {
        const a = result.action;
        await trx.insertInto('actions').values({
          ...common, id: a.operationId, kind: a.kind, summary: a.summary, details: JSON.stringify(a.details),
          status: 'pending', decision: null, reason: null, decided_at: null,
        }).execute();
      }
      if (result.question) {
        const q = result.question;
        await trx.insertInto('questions').values({
          ...common, id: q.requestId, asked_of: q.askedOfUserId ?? job.user_id, text: q.text, answer_type: q.answerType,
          status: 'open', answer: null, answered_at: null,
        }).execute();
      }
    } else if (missionId) {
      const stopped = payload.kind === 'action_rejected' && !payload.reason;
      await trx.updateTable('missions').set({ status: stopped ? 'stopped' : 'done', updated_at: now }).where('id', '=', missionId).execute();
    }
    return { status: 'done' as const, replyTurnId: turn.id, reply: { text: result.reply, ts: turn.ts } };
  }

  /** A continuation whose action or question was removed: close the mission, say so once. */
  private closeMission(job: Job, payload: JobPayload): Finisher {
    return async (trx) => {
      const turn = await appendTurn(trx, this.store.dialect, {
        sessionId: job.session_id, role: 'agent', text: 'This task was closed: what it waited for no longer exists.', jobId: job.id,
      });
      if (payload.kind !== 'message') {
        await trx.updateTable('missions').set({ status: 'closed', updated_at: isoNow() }).where('id', '=', payload.missionId).execute();
      }
      return { status: 'done', replyTurnId: turn.id };
    };
  }
}
