import type { Hold } from '../../engine/wakeups.ts';
import type { Session } from '../../store/schema.ts';
import type { SendResult, TranscriptResult } from './schemas.ts';
import { type InboundMessage, MessagePipeline, type SendingDeps } from './sending.ts';
import { type CancelResult, cancelSession } from './cancelling.ts';
import { findOwnSession, latestTranscript, type LatestTranscript, listSessionsPage, type SessionListItem, transcript } from './transcripts.ts';

/**
 * Conversations: sending a message through the one pipeline every channel submits to
 * (sending.ts), and reading a session's turns and the account's sessions (transcripts.ts).
 */
export class ConversationsService {
  private readonly deps: SendingDeps;
  private readonly pipeline: MessagePipeline;

  constructor(deps: SendingDeps) {
    this.deps = deps;
    this.pipeline = new MessagePipeline(deps);
  }

  /** The longest a send waits for its reply before answering processing or queued. */
  get waitCeilingMs(): number {
    return this.deps.waitCeilingMs;
  }

  /** §1: accepts the message and waits (up to the ceiling) for its turn to end. */
  submit(inbound: InboundMessage): Promise<SendResult> {
    return this.pipeline.submit(inbound);
  }

  findOwnSession(userId: string, sessionId: string): Promise<Session | undefined> {
    return findOwnSession(this.deps.store.db, userId, sessionId);
  }

  /**
   * §4: turns after `after`, oldest first. With `hold` (§9.1), a read after `after` that finds
   * nothing newer waits up to `hold.waitMs` for a turn.
   */
  transcript(
    userId: string, sessionId: string, options: { after?: string | undefined; limit?: number | undefined } = {},
    hold?: Hold,
  ): Promise<TranscriptResult> {
    return transcript(this.deps.store.db, userId, sessionId, options, hold ? { ...hold, wakeups: this.deps.engine.wakeups } : null);
  }

  /** §9.4: stops the session's queued and running messages and closes what its missions wait on. */
  cancel(userId: string, sessionId: string): Promise<CancelResult> {
    return cancelSession(this.deps, userId, sessionId);
  }

  /** A transcript's newest turns (before `before`, when given), oldest first: where the chat opens. */
  latestTranscript(userId: string, sessionId: string, options: { before?: string | undefined; limit?: number | undefined } = {}): Promise<LatestTranscript> {
    return latestTranscript(this.deps.store.db, userId, sessionId, options);
  }

  /** One page of the account's sessions, most recently active first. */
  listSessionsPage(userId: string, options: { limit?: number | undefined; cursor?: string | undefined } = {}): Promise<{ sessions: SessionListItem[]; next_cursor: string | null }> {
    return listSessionsPage(this.deps.store.db, userId, options);
  }
}
