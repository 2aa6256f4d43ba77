import { createHash } from 'node:crypto';
import { newId, looksLikeId } from '../domain/ids.ts';
import { checkMessageText, Problem } from '../domain/problems.ts';
import { isValidTs } from '../domain/turn-clock.ts';
import { getJob, sessionStatus } from '../engine/queue-sql.ts';
import type { JobState, TurnEngine } from '../engine/turn-engine.ts';
import { appendTurn, readTranscript } from '../store/repos/transcript.ts';
import { prepared } from '../store/prepared.ts';
import type { Session } from '../store/schema.ts';
import { isUniqueViolation, type Store } from '../store/store.ts';
import type { AgentsService } from './agents.ts';
import type { JobPayload } from './turn-worker.ts';

export type SendStatus = 'completed' | 'processing' | 'queued' | 'duplicate';

export interface SendResult {
  session_id: string;
  status: SendStatus;
  agent_id: string;
  message_ts: string;
  reply?: string;
  reply_ts?: string;
}

export interface InboundMessage {
  userId: string;
  /** Which channel it came through (api, web, …); recorded on a new session. */
  channel: string;
  text: unknown;
  sessionId?: string | undefined;
  agentId?: string | undefined;
  idempotencyKey?: string | undefined;
  /** How long to wait for the reply; capped at the server's ceiling. */
  waitMs?: number | undefined;
}

export interface TranscriptResult {
  session_id: string;
  agent_id: string;
  status: 'idle' | 'processing' | 'queued';
  messages: { role: 'user' | 'agent'; text: string; ts: string; error?: string }[];
  has_more: boolean;
}

export interface ConversationsDeps {
  store: Store;
  engine: TurnEngine;
  agents: AgentsService;
  waitCeilingMs: number;
  duplicateWindowMs: number;
  idempotencyTtlMs: number;
  /** A pending Idempotency-Key older than this was left by a request that died before accepting. */
  pendingAbandonedAfterMs?: number;
}

const ownSession = prepared((db, sessionId: string, userId: string) => db.selectFrom('sessions').selectAll()
  .where('id', '=', sessionId).where('user_id', '=', userId));

const DEFAULT_PENDING_ABANDONED_AFTER_MS = 30_000;

const sha256 = (value: string): string => createHash('sha256').update(value).digest('hex');

/**
 * The one pipeline every channel submits to: resolve the session and agent, apply the
 * duplicate and idempotency rules, append the user turn and enqueue its job in one
 * transaction, then wait (up to the ceiling) for the turn to end. Knows nothing of HTTP.
 */
export class ConversationsService {
  private readonly deps: ConversationsDeps;

  constructor(deps: ConversationsDeps) {
    this.deps = deps;
  }

  get waitCeilingMs(): number {
    return this.deps.waitCeilingMs;
  }

  async submit(inbound: InboundMessage): Promise<SendResult> {
    const text = checkMessageText(inbound.text);
    const waitMs = Math.max(0, Math.min(inbound.waitMs ?? this.deps.waitCeilingMs, this.deps.waitCeilingMs));
    if (inbound.idempotencyKey !== undefined) return this.submitIdempotent(inbound, text, waitMs);
    const target = await this.resolveTarget(inbound);
    const accepted = await this.accept(inbound, text, target, null);
    if (accepted.duplicateOf !== null) return this.duplicateResult(accepted.duplicateOf);
    return this.outcome(accepted.jobId, accepted.messageTs, waitMs);
  }

  /** Idempotency-Key: a retry within the TTL starts nothing and returns the first outcome as it stands. */
  private async submitIdempotent(inbound: InboundMessage, text: string, waitMs: number): Promise<SendResult> {
    const { db } = this.deps.store;
    const key = inbound.idempotencyKey!;
    const bodyHash = sha256(JSON.stringify([text, inbound.sessionId ?? null, inbound.agentId ?? null]));
    // Forget the key once it expired, or when its first request never got accepted (its process
    // died between taking the key and accepting): accepting takes milliseconds, not half a minute.
    const expired = new Date(Date.now() - this.deps.idempotencyTtlMs).toISOString();
    const abandoned = new Date(Date.now() - (this.deps.pendingAbandonedAfterMs ?? DEFAULT_PENDING_ABANDONED_AFTER_MS)).toISOString();
    await db.deleteFrom('idempotency_keys').where('user_id', '=', inbound.userId).where('key', '=', key)
      .where((eb) => eb.or([eb('created_at', '<', expired), eb.and([eb('state', '=', 'pending'), eb('created_at', '<', abandoned)])]))
      .execute();
    // Our pending record is known by its created_at: a retry after pendingAbandonedAfterMs
    // may have replaced it, and then this request must neither accept nor free the key.
    const pendingSince = new Date().toISOString();
    try {
      await db.insertInto('idempotency_keys').values({
        user_id: inbound.userId, key, body_hash: bodyHash, state: 'pending', session_id: null, job_id: null, created_at: pendingSince,
      }).execute();
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      const first = await db.selectFrom('idempotency_keys').selectAll().where('user_id', '=', inbound.userId).where('key', '=', key).executeTakeFirst();
      if (!first) throw new Problem('idempotency_key_in_use', 'A request with this Idempotency-Key is still being accepted; retry shortly.');
      if (first.body_hash !== bodyHash) {
        throw new Problem('idempotency_key_reused', 'This Idempotency-Key was used with a different body.');
      }
      if (first.state === 'pending' || first.job_id === null) {
        throw new Problem('idempotency_key_in_use', 'A request with this Idempotency-Key is still being accepted; retry shortly.');
      }
      return this.outcome(Number(first.job_id), null, 0);
    }
    try {
      const target = await this.resolveTarget(inbound);
      const accepted = await this.accept(inbound, text, target, { key, pendingSince });
      return this.outcome(accepted.jobId, accepted.messageTs, waitMs);
    } catch (error) {
      // Not accepted: free the key so that a corrected retry can use it.
      await db.deleteFrom('idempotency_keys').where('user_id', '=', inbound.userId).where('key', '=', key)
        .where('state', '=', 'pending').where('created_at', '=', pendingSince).execute();
      throw error;
    }
  }

  /** The contract's agent resolution; sessions of other accounts are indistinguishable from missing ones. */
  private async resolveTarget(inbound: InboundMessage): Promise<{ session: Session | null; agentId: string }> {
    if (inbound.sessionId !== undefined) {
      const session = await this.findOwnSession(inbound.userId, inbound.sessionId);
      if (!session) throw new Problem('session_not_found', 'No such session.');
      return { session, agentId: session.agent_id };
    }
    if (inbound.agentId !== undefined) {
      const agent = await this.deps.agents.findAvailable(inbound.userId, inbound.agentId);
      if (!agent) throw new Problem('agent_not_found', 'No such agent, or you cannot message it.');
      return { session: null, agentId: agent.id };
    }
    const agents = await this.deps.agents.listForUser(inbound.userId);
    if (agents.length === 1) return { session: null, agentId: agents[0]!.agent_id };
    if (agents.length === 0) throw new Problem('agent_not_found', 'You have no agent to message. Create one first.');
    throw new Problem('agent_required', 'You can message several agents: name one with agent_id (see GET /agents).');
  }

  /** One transaction: duplicate check, session, user turn, job, idempotency record. */
  private async accept(
    inbound: InboundMessage, text: string, target: { session: Session | null; agentId: string },
    idempotency: { key: string; pendingSince: string } | null,
  ) {
    const { engine, store } = this.deps;
    return engine.transact(async (trx, stage, hooks) => {
      const now = new Date();
      const targetKey = target.session ? target.session.id : `agent:${target.agentId}`;
      const textHash = sha256(text);
      if (this.deps.duplicateWindowMs > 0) {
        // Claim (user, target, text) for the window. A request with an Idempotency-Key is never a
        // duplicate itself (the key alone decides) but still claims, so a plain resend of the same
        // text within the window is recognised as one.
        const replaceIfBefore = idempotency === null
          ? new Date(now.getTime() - this.deps.duplicateWindowMs).toISOString()
          : '9999-12-31T23:59:59.999Z'; // keyed: always take the claim over
        const claimed = await trx.insertInto('recent_messages').values({
          user_id: inbound.userId, target: targetKey, text_hash: textHash, session_id: null, job_id: null, created_at: now.toISOString(),
        }).onConflict((oc) => oc.columns(['user_id', 'target', 'text_hash']).doUpdateSet({
          created_at: now.toISOString(), session_id: null, job_id: null,
        }).where('recent_messages.created_at', '<=', replaceIfBefore))
          .returning('user_id').executeTakeFirst();
        if (!claimed) {
          const original = await trx.selectFrom('recent_messages').select(['job_id'])
            .where('user_id', '=', inbound.userId).where('target', '=', targetKey).where('text_hash', '=', textHash).executeTakeFirstOrThrow();
          return { duplicateOf: Number(original.job_id), jobId: 0, messageTs: '' };
        }
      }
      let sessionId = target.session?.id;
      if (!sessionId) {
        sessionId = newId('session');
        await trx.insertInto('sessions').values({
          id: sessionId, user_id: inbound.userId, agent_id: target.agentId, channel: inbound.channel, last_ts: null, created_at: now.toISOString(),
        }).execute();
      }
      const turn = await appendTurn(trx, store.dialect, { sessionId, role: 'user', text });
      const payload: JobPayload = { kind: 'message', text };
      const jobId = await engine.enqueue(trx, stage, hooks, { agentId: target.agentId, sessionId, userId: inbound.userId, kind: 'message', payload, userTurnId: turn.id });
      await trx.updateTable('turns').set({ job_id: jobId }).where('id', '=', turn.id).execute();
      if (idempotency !== null) {
        const taken = await trx.updateTable('idempotency_keys').set({ state: 'accepted', session_id: sessionId, job_id: jobId })
          .where('user_id', '=', inbound.userId).where('key', '=', idempotency.key)
          .where('state', '=', 'pending').where('created_at', '=', idempotency.pendingSince).executeTakeFirst();
        // Our claim was given up as abandoned and taken by a retry: that retry's turn is the one.
        if (Number(taken.numUpdatedRows) !== 1) {
          throw new Problem('idempotency_key_in_use', 'This request took too long to be accepted; a retry with the same Idempotency-Key took over.');
        }
      }
      if (this.deps.duplicateWindowMs > 0) {
        await trx.updateTable('recent_messages').set({ session_id: sessionId, job_id: jobId })
          .where('user_id', '=', inbound.userId).where('target', '=', targetKey).where('text_hash', '=', textHash).execute();
      }
      return { duplicateOf: null, jobId, messageTs: turn.ts };
    });
  }

  /** Waits up to `waitMs` for the job, then says where it stands. */
  private async outcome(jobId: number, messageTs: string | null, waitMs: number): Promise<SendResult> {
    const state = await this.deps.engine.waitForJob(jobId, waitMs);
    if (state.job.status === 'failed') {
      throw new Problem('agent_failed', 'The agent could not process the message.', { session_id: state.job.session_id });
    }
    return this.describe(state, messageTs);
  }

  /** The send result of a job; reads only the turns it does not already know. */
  private async describe({ job, reply }: JobState, knownMessageTs: string | null = null): Promise<SendResult> {
    const { db } = this.deps.store;
    const replyTurnId = job.status === 'done' && !reply ? job.reply_turn_id : null;
    const userTurnId = knownMessageTs === null ? job.user_turn_id : null;
    const ids = [userTurnId, replyTurnId].filter((id): id is number => id !== null);
    const turns = ids.length ? await db.selectFrom('turns').select(['id', 'text', 'ts']).where('id', 'in', ids).execute() : [];
    const messageTs = knownMessageTs ?? turns.find((t) => Number(t.id) === job.user_turn_id)?.ts ?? '';
    const replyTurn = job.status !== 'done' ? undefined : reply ?? turns.find((t) => Number(t.id) === job.reply_turn_id);
    const status: SendStatus = job.status === 'done' || job.status === 'failed' ? 'completed' : job.status === 'running' ? 'processing' : 'queued';
    return {
      session_id: job.session_id,
      status,
      agent_id: job.agent_id,
      message_ts: messageTs,
      ...(replyTurn ? { reply: replyTurn.text, reply_ts: replyTurn.ts } : {}),
    };
  }

  private async duplicateResult(originalJobId: number): Promise<SendResult> {
    const job = await getJob(this.deps.store.db, originalJobId);
    const described = await this.describe({ job: job! });
    return { ...described, status: 'duplicate' };
  }

  async findOwnSession(userId: string, sessionId: string): Promise<Session | undefined> {
    if (!looksLikeId('session', sessionId)) return undefined;
    const [session] = await ownSession(this.deps.store.db, sessionId, userId);
    return session;
  }

  /** §4: turns after `after`, oldest first; other accounts' sessions are "not found". */
  async transcript(userId: string, sessionId: string, options: { after?: string | undefined; limit?: number | undefined } = {}): Promise<TranscriptResult> {
    const after = options.after ?? null;
    if (after !== null && !isValidTs(after)) {
      throw Problem.validation([{ path: 'after', message: 'must be a turn ts such as 2026-11-22T12:34:56.789012Z' }]);
    }
    const limit = options.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw Problem.validation([{ path: 'limit', message: 'must be an integer from 1 to 200' }]);
    const session = await this.findOwnSession(userId, sessionId);
    if (!session) throw new Problem('session_not_found', 'No such session.');
    const [page, status] = await Promise.all([
      readTranscript(this.deps.store.db, session.id, after, limit),
      sessionStatus(this.deps.store.db, session.id),
    ]);
    return { session_id: session.id, agent_id: session.agent_id, status, messages: page.messages, has_more: page.hasMore };
  }

  /** The account's sessions, most recently active first (for the web app). */
  async listSessions(userId: string, limit = 100) {
    const rows = await this.deps.store.db.selectFrom('sessions')
      .innerJoin('agents', 'agents.id', 'sessions.agent_id')
      .select(['sessions.id', 'sessions.agent_id', 'agents.name as agent_name', 'sessions.channel', 'sessions.created_at', 'sessions.last_ts'])
      .where('sessions.user_id', '=', userId)
      .orderBy('sessions.last_ts', 'desc').orderBy('sessions.id').limit(limit).execute();
    return Promise.all(rows.map(async (r) => ({
      session_id: r.id, agent_id: r.agent_id, agent_name: r.agent_name, channel: r.channel, created_at: r.created_at,
      last_activity: r.last_ts, status: await sessionStatus(this.deps.store.db, r.id),
    })));
  }
}
