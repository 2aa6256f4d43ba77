import { hash } from 'node:crypto';
import { newId } from '../../domain/ids.ts';
import { checkMessageText, Problem } from '../../domain/problems.ts';
import { getJob } from '../../engine/queue-sql.ts';
import { isFinished, type JobState, type JobWatch, type TurnEngine } from '../../engine/turn-engine.ts';
import { appendTurn, startSession } from '../../store/repos/transcript.ts';
import { prepared } from '../../store/prepared.ts';
import type { Job, Session } from '../../store/schema.ts';
import { isUniqueViolation, type Store } from '../../store/store.ts';
import type { AgentsService } from '../agents.ts';
import { awaitingIn } from '../missions/awaiting.ts';
import { isStoreUnavailable } from '../../store/unavailable.ts';
import type { JobPayload } from '../missions/job-payload.ts';
import type { SendResult, SendStatus } from './schemas.ts';
import { findOwnSession } from './transcripts.ts';

/** A message as a channel hands it to the pipeline, its text not checked yet. */
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
  /**
   * Aborts when the sender has gone (its connection closed): the wait ends then, so nothing is
   * held for it. The message stays accepted and its turn runs; the reply lands in the transcript.
   */
  signal?: AbortSignal | undefined;
}

/** What sending needs, the rules' settings (duplicate window, Idempotency-Key time to live, wait ceiling) among them. */
export interface SendingDeps {
  store: Store;
  engine: TurnEngine;
  agents: AgentsService;
  waitCeilingMs: number;
  duplicateWindowMs: number;
  idempotencyTtlMs: number;
  /** A pending Idempotency-Key older than this was left by a request that died before accepting. */
  pendingAbandonedAfterMs?: number;
}

const DEFAULT_PENDING_ABANDONED_AFTER_MS = 30_000;

// The statements of accepting a message: built once (see store/prepared.ts).
const acceptIdempotencyKey = prepared((db, sessionId: string, jobId: number, userId: string, key: string, pendingSince: string) =>
  db.updateTable('idempotency_keys').set({ state: 'accepted', session_id: sessionId, job_id: jobId })
    .where('user_id', '=', userId).where('key', '=', key).where('state', '=', 'pending').where('created_at', '=', pendingSince));
const claimRecentMessage = prepared((db, userId: string, target: string, textHash: string, sessionId: string, jobId: number,
  createdAt: string, replaceIfBefore: string) => db.insertInto('recent_messages').values({
  user_id: userId, target, text_hash: textHash, session_id: sessionId, job_id: jobId, created_at: createdAt,
}).onConflict((oc) => oc.columns(['user_id', 'target', 'text_hash']).doUpdateSet((eb) => ({
  created_at: eb.ref('excluded.created_at'), session_id: eb.ref('excluded.session_id'), job_id: eb.ref('excluded.job_id'),
})).where('recent_messages.created_at', '<=', replaceIfBefore)).returning('user_id'));
const recentMessage = prepared((db, userId: string, target: string, textHash: string) => db.selectFrom('recent_messages')
  .select(['job_id']).where('user_id', '=', userId).where('target', '=', target).where('text_hash', '=', textHash));

/** Thrown inside the accepting transaction to roll it back: the same message was just received. */
class DuplicateMessage extends Error {
  readonly originalJobId: number;
  constructor(originalJobId: number) {
    super('duplicate message');
    this.originalJobId = originalJobId;
  }
}

const sha256 = (value: string): string => hash('sha256', value, 'hex');

/**
 * The one pipeline every channel submits to: resolve the session and agent, apply the
 * duplicate and idempotency rules, append the user turn and enqueue its job in one
 * transaction, then wait (up to the ceiling) for the turn to end. Knows nothing of HTTP.
 */
export class MessagePipeline {
  private readonly deps: SendingDeps;

  constructor(deps: SendingDeps) {
    this.deps = deps;
  }

  async submit(inbound: InboundMessage): Promise<SendResult> {
    const text = checkMessageText(inbound.text);
    const waitMs = Math.max(0, Math.min(inbound.waitMs ?? this.deps.waitCeilingMs, this.deps.waitCeilingMs));
    if (inbound.idempotencyKey !== undefined) return this.submitIdempotent(inbound, text, waitMs);
    const target = await this.resolveTarget(inbound);
    const accepted = await this.accept(inbound, text, target, null);
    if (accepted.duplicateOf !== null) return this.duplicateResult(accepted.duplicateOf);
    return this.outcome(accepted.watch.wait(waitMs, accepted.job, inbound.signal), accepted.messageTs);
  }

  /** Idempotency-Key: a retry within the TTL starts nothing and returns the first outcome as it stands. */
  private async submitIdempotent(inbound: InboundMessage, text: string, waitMs: number): Promise<SendResult> {
    const { db } = this.deps.store;
    const key = inbound.idempotencyKey!;
    const bodyHash = sha256(JSON.stringify([text, inbound.sessionId ?? null, inbound.agentId ?? null]));
    // Forget the key once it expired, or when its first request never got accepted (its process
    // died between taking the key and accepting): accepting takes milliseconds, not half a minute.
    // By the store's clock: another instance wrote the records this compares with.
    const now = this.deps.store.clock.now();
    const expired = new Date(now - this.deps.idempotencyTtlMs).toISOString();
    const abandoned = new Date(now - (this.deps.pendingAbandonedAfterMs ?? DEFAULT_PENDING_ABANDONED_AFTER_MS)).toISOString();
    await db.deleteFrom('idempotency_keys').where('user_id', '=', inbound.userId).where('key', '=', key)
      .where((eb) => eb.or([eb('created_at', '<', expired), eb.and([eb('state', '=', 'pending'), eb('created_at', '<', abandoned)])]))
      .execute();
    // Our pending record is known by its created_at: a retry after pendingAbandonedAfterMs
    // may have replaced it, and then this request must neither accept nor free the key.
    const pendingSince = new Date(now).toISOString();
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
      return this.outcome(this.deps.engine.waitForJob(Number(first.job_id), 0), null);
    }
    try {
      const target = await this.resolveTarget(inbound);
      const accepted = await this.accept(inbound, text, target, { key, pendingSince });
      if (accepted.duplicateOf !== null) throw new Error('a keyed message is never a duplicate');
      return this.outcome(accepted.watch.wait(waitMs, accepted.job, inbound.signal), accepted.messageTs);
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
      const session = await findOwnSession(this.deps.store.db, inbound.userId, inbound.sessionId);
      if (!session) throw new Problem('session_not_found', 'No such session.');
      // The session is the caller's, but its agent only while they may message it: one taken out
      // of the agent's workspace (workspaces remove-member) continues no session there either.
      if (!(await this.deps.agents.findAvailable(inbound.userId, session.agent_id))) {
        throw new Problem('agent_not_found', 'You can no longer message this session\'s agent: you are not a member of its workspace.');
      }
      return { session, agentId: session.agent_id };
    }
    if (inbound.agentId !== undefined) {
      const agent = await this.deps.agents.findAvailable(inbound.userId, inbound.agentId);
      if (!agent) throw new Problem('agent_not_found', 'No such agent, or you cannot message it.');
      return { session: null, agentId: agent.agent_id };
    }
    const agents = await this.deps.agents.listForUser(inbound.userId);
    if (agents.length === 1) return { session: null, agentId: agents[0]!.agent_id };
    if (agents.length === 0) throw new Problem('agent_not_found', 'You have no agent to message: create one first (POST /agents).');
    // Said in full: a client that meant to continue a session but misspelt the field (`sessionId`)
    // lands here too, and learns the field's name.
    throw new Problem('agent_required', 'You can message several agents: name one with agent_id (see GET /agents) for a new session, or continue one with session_id.');
  }

  /**
   * One transaction: session, user turn, job, idempotency record, duplicate claim. The claim
   * comes last so that it can carry the job it stands for; a duplicate rolls all of it back.
   */
  private async accept(
    inbound: InboundMessage, text: string, target: { session: Session | null; agentId: string },
    idempotency: { key: string; pendingSince: string } | null,
  ): Promise<{ duplicateOf: number } | { duplicateOf: null; job: Job; watch: JobWatch; messageTs: string }> {
    const { engine, store } = this.deps;
    try {
      return await engine.transact(async (tx) => {
        const sessionId = target.session?.id ?? newId('session');
        const turn = target.session
          ? await appendTurn(tx.db, store.dialect, { sessionId, role: 'user', text })
          : await startSession(tx.db, store.dialect, { id: sessionId, userId: inbound.userId, agentId: target.agentId, channel: inbound.channel }, { role: 'user', text });
        // Held reads of the transcript wake (a new session has none: nobody knew its id).
        if (target.session) await tx.publish({ type: 'session_turn', sessionId });
        const payload: JobPayload = { kind: 'message', text };
        const job = await engine.enqueue(tx, { agentId: target.agentId, sessionId, userId: inbound.userId, kind: 'message', payload, userTurnId: turn.id });
        if (idempotency !== null) {
          const taken = await acceptIdempotencyKey.affected(tx.db, sessionId, job.id, inbound.userId, idempotency.key, idempotency.pendingSince);
          // Our claim was given up as abandoned and taken by a retry: that retry's turn is the one.
          if (taken !== 1) {
            throw new Problem('idempotency_key_in_use', 'This request took too long to be accepted; a retry with the same Idempotency-Key took over.');
          }
        }
        if (this.deps.duplicateWindowMs > 0) {
          // Claim (user, target, text) for the window. A request with an Idempotency-Key is never a
          // duplicate itself (the key alone decides) but still claims, so a plain resend of the same
          // text within the window is recognised as one.
          const now = new Date(store.clock.now()); // the claims it is compared with may be other instances'
          const targetKey = target.session ? target.session.id : `agent:${target.agentId}`;
          const textHash = sha256(text);
          const replaceIfBefore = idempotency === null
            ? new Date(now.getTime() - this.deps.duplicateWindowMs).toISOString()
            : '9999-12-31T23:59:59.999Z'; // keyed: always take the claim over
          const [claimed] = await claimRecentMessage(tx.db, inbound.userId, targetKey, textHash, sessionId, job.id, now.toISOString(), replaceIfBefore);
          if (!claimed) {
            const [original] = await recentMessage(tx.db, inbound.userId, targetKey, textHash);
            throw new DuplicateMessage(Number(original!.job_id));
          }
        }
        // Listening starts before the commit, so the reply cannot slip past unheard.
        const watch = engine.watch(job.id);
        tx.onRollback(() => watch.cancel());
        return { duplicateOf: null, job, watch, messageTs: turn.ts };
      });
    } catch (error) {
      if (error instanceof DuplicateMessage) return { duplicateOf: error.originalJobId };
      throw error;
    }
  }

  /** Where the job stands once `state` settles (its end, or the wait's); a failure is agent_failed. */
  private async outcome(state: Promise<JobState>, messageTs: string | null): Promise<SendResult> {
    const settled = await state;
    if (settled.job.status === 'failed') {
      // message_ts too, so that the transcript can be read from the message on (`?after=`).
      const { job } = settled;
      const message = messageTs !== null || job.user_turn_id === null ? undefined
        : await this.deps.store.db.selectFrom('turns').select('ts').where('id', '=', job.user_turn_id).executeTakeFirst();
      throw new Problem('agent_failed', 'The agent could not process the message.', { session_id: job.session_id, message_ts: messageTs ?? message?.ts ?? '' });
    }
    return this.sendResultOf(settled, messageTs);
  }

  /**
   * The send result of a job; reads only the turns it does not already know. A finished job's
   * reply is its agent turn, the error turn of a failure included (only a duplicate of a failed
   * original gets that far: every other send of a failure is a 502).
   */
  private async sendResultOf({ job, reply }: JobState, knownMessageTs: string | null = null): Promise<SendResult> {
    const { db } = this.deps.store;
    const finished = isFinished(job);
    const replyTurnId = finished && !reply ? job.reply_turn_id : null;
    const userTurnId = knownMessageTs === null ? job.user_turn_id : null;
    const ids = [userTurnId, replyTurnId].filter((id): id is number => id !== null);
    const [turns, awaiting] = await Promise.all([
      ids.length ? db.selectFrom('turns').select(['id', 'text', 'ts', 'error']).where('id', 'in', ids).execute() : [],
      // The database away: a message accepted is still answered (202, as it stands); the
      // transcript says what waits once the database is back.
      awaitingIn(db, job.user_id, job.session_id).catch((error: unknown) => {
        if (isStoreUnavailable(error)) return [];
        throw error;
      }),
    ]);
    const messageTs = knownMessageTs ?? turns.find((t) => Number(t.id) === job.user_turn_id)?.ts ?? '';
    const replyTurn: { text: string; ts: string; error?: string | null } | undefined = finished
      ? reply ?? turns.find((t) => Number(t.id) === job.reply_turn_id)
      : undefined;
    const status: SendStatus = finished ? 'completed' : job.status === 'running' ? 'processing' : 'queued';
    // A failure's from the job, not the turn (one whose session was gone has no error turn to
    // read); a cancelled message's is its `Cancelled.` turn's (§9.4).
    const error = job.status === 'failed' ? replyTurn?.error ?? 'agent_failed' : replyTurn?.error;
    return {
      session_id: job.session_id,
      status,
      agent_id: job.agent_id,
      message_ts: messageTs,
      ...(replyTurn ? { reply: replyTurn.text, reply_ts: replyTurn.ts } : {}),
      ...(error ? { error } : {}),
      awaiting,
    };
  }

  private async duplicateResult(originalJobId: number): Promise<SendResult> {
    const job = await getJob(this.deps.store.db, originalJobId);
    const described = await this.sendResultOf({ job: job! });
    return { ...described, status: 'duplicate' };
  }
}
