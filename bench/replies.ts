/**
 * How a benchmark client learns of a reply without holding its POST: from an event stream
 * (StreamedReplies) or by long-polling the transcript (longPoll). Shared by bench:push and bench:load.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { nowMs, tsMs, type ApiClient, type StreamedEvent } from './push-client.ts';

/** A reply as the client learned of it. */
export interface Learned { text: string; ts: string; error?: string; receivedMs: number }

/** Replies of the conversations' sessions as the event streams bring them, and the turns awaiting them. */
export class StreamedReplies {
  private readonly arrived = new Map<string, Learned>();
  private readonly waiting = new Map<string, { afterMs: number; resolve: (learned: Learned) => void }>();
  private readonly timeoutMs: number;

  /** A reply not streamed `timeoutMs` after it was awaited is lost. */
  constructor(timeoutMs: number) {
    this.timeoutMs = timeoutMs;
  }

  take({ type, event, receivedMs }: StreamedEvent): void {
    if (type !== 'turn.completed' && type !== 'turn.failed') return;
    const learned: Learned = { text: event.data.text, ts: event.data.ts, error: event.data.error, receivedMs };
    const waiter = this.waiting.get(event.session_id);
    if (waiter && tsMs(learned.ts) > waiter.afterMs) {
      this.waiting.delete(event.session_id);
      waiter.resolve(learned);
    } else {
      this.arrived.set(event.session_id, learned);
    }
  }

  /** The session's first reply after `afterTs`, whether it came already or comes within the timeout. */
  async next(sessionId: string, afterTs: string): Promise<Learned> {
    const afterMs = tsMs(afterTs);
    const early = this.arrived.get(sessionId);
    this.arrived.delete(sessionId);
    if (early && tsMs(early.ts) > afterMs) return early;
    const timeout = new AbortController();
    const learned = new Promise<Learned>((resolve) => this.waiting.set(sessionId, { afterMs, resolve }));
    const lost = sleep(this.timeoutMs, null, { signal: timeout.signal }).then(() => { throw new Error(`no event for the reply in ${sessionId} after ${afterTs}`); });
    try {
      return await Promise.race([learned, lost]);
    } finally {
      timeout.abort();
      lost.catch(() => {});
    }
  }
}

/** The first agent turn of a transcript page, stamped with the page's arrival. */
export function agentTurnOf(page: { body: any; receivedMs: number }): Learned | undefined {
  const turn = page.body.messages.find((m: any) => m.role === 'agent');
  return turn && { ...turn, receivedMs: page.receivedMs };
}

/** The reply after `messageTs`, by reads of the transcript held with `Prefer: wait=<waitSeconds>`; lost after `timeoutMs`. */
export async function longPoll(client: ApiClient, sessionId: string, messageTs: string, waitSeconds: number, timeoutMs: number): Promise<Learned> {
  const deadline = nowMs() + timeoutMs;
  for (;;) {
    const page = await client.json('GET', `/sessions/${sessionId}/messages?after=${encodeURIComponent(messageTs)}`, undefined, { prefer: `wait=${waitSeconds}` });
    if (page.status !== 200) throw new Error(`long-poll: ${JSON.stringify(page.body)}`);
    const learned = agentTurnOf(page);
    if (learned) return learned;
    if (nowMs() > deadline) throw new Error(`no reply long-polled in ${sessionId} after ${messageTs}`);
  }
}
