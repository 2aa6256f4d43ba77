import type { AwaitingItem } from '../../../services/missions/schemas.ts';
import type { TranscriptResult } from '../../../services/conversations/schemas.ts';
import type { WebContext } from '../context.ts';
import { html, type SafeHtml } from '../html.ts';
import { badge } from '../layout.ts';

/** How many actions and questions wait for this person's decision or answer, in the whole inbox. */
export function waitingOnYou(ctx: WebContext, userId: string): Promise<{ actions: number; questions: number }> {
  return ctx.services.missions.countWaiting(userId);
}

/**
 * "Waiting for you": a conversation whose agent has stopped (idle) on actions to approve or
 * questions to answer (§9.2's `awaiting`), which its owner settles in the inbox. While the agent
 * still works, the page says that instead.
 */
export function waitsForYou(status: TranscriptResult['status'], awaiting: number): boolean {
  return status === 'idle' && awaiting > 0;
}

/** A conversation's badge: its status, or "waiting for you". */
export function sessionBadge(status: TranscriptResult['status'], awaiting: number): SafeHtml {
  return waitsForYou(status, awaiting) ? html`<span class="badge badge-waiting">waiting for you</span>` : badge(status);
}

/** What waits, in words ("1 action to approve or reject and 2 questions to answer"); empty when nothing does. */
export function waitingText(awaiting: readonly AwaitingItem[]): string {
  const actions = awaiting.filter((item) => item.type === 'action').length;
  const questions = awaiting.length - actions;
  return [
    actions ? `${actions} action${actions === 1 ? '' : 's'} to approve or reject` : '',
    questions ? `${questions} question${questions === 1 ? '' : 's'} to answer` : '',
  ].filter(Boolean).join(' and ');
}

/**
 * The chat's "Waiting for you": how many actions and questions its agent has stopped on, hidden
 * (for the script to fill in) while nothing waits; the cards to settle them follow it
 * (chat-awaiting.ts). In a live region that is always there, so that a screen reader says it when
 * it appears. app.js's showWaiting draws the same.
 */
export function waitingNotice(transcript: Pick<TranscriptResult, 'status' | 'awaiting'> | null): SafeHtml {
  const awaiting = transcript && waitsForYou(transcript.status, transcript.awaiting.length) ? transcript.awaiting : [];
  return html`<div role="status"><div class="notice notice-info chat-waiting" data-chat-waiting${awaiting.length ? '' : html` hidden`}>
    <p><strong>Waiting for you:</strong> <span data-chat-waiting-text>${waitingText(awaiting)}</span>, below or in <a href="/inbox">the inbox</a>.</p>
  </div></div>`;
}
