import type { FastifyInstance } from 'fastify';
import { looksLikeId } from '../../../domain/ids.ts';
import { Problem } from '../../../domain/problems.ts';
import { authed, errorPage, render, type WebContext } from '../context.ts';
import { html, type SafeHtml } from '../html.ts';
import { time } from '../layout.ts';
import { sessionBadge } from './waiting.ts';
import type { TranscriptResult } from '../../../services/conversations/schemas.ts';
import type { LatestTranscript } from '../../../services/conversations/transcripts.ts';

/** Turns a transcript page of the web app shows (the chat opens at the latest ones), and conversations a page of the list shows. */
const TRANSCRIPT_PAGE_SIZE = 100;
const SESSIONS_PAGE_SIZE = 50;

/** Conversations: the account's sessions, and each one's transcript with its status. */
export function conversationsRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get('/conversations', authed<{ Querystring: { older?: string } }>(async (request, reply, session) => {
    const cursor = request.query.older || undefined;
    const listed = await orNull(ctx.services.conversations.listSessionsPage(session.userId, { limit: SESSIONS_PAGE_SIZE, cursor }));
    if (!listed) return errorPage(request, reply, 400, 'Link not valid', html`This link to older conversations could not be read. <a href="/conversations">Start from the most recent</a>.`);
    const { sessions, next_cursor: next } = listed;
    return render(request, reply, {
      title: 'Conversations', nav: 'conversations',
      body: html`<h1>Conversations</h1>
        <section class="card" aria-labelledby="sessions-h">
          <h2 id="sessions-h" class="sr-only">Sessions</h2>
          ${cursor ? html`<p class="muted small">Older conversations. <a href="/conversations">Back to the most recent</a></p>` : ''}
          ${sessions.length === 0
            ? cursor ? html`<p class="muted">No older conversations.</p>` : html`<p class="muted">No conversations yet. <a href="/chat">Start one in the chat</a> or send a message through the API.</p>`
            : html`<div class="table-wrap"><table class="table">
              <caption class="sr-only">Your sessions, most recent first</caption>
              <thead><tr><th scope="col">Conversation</th><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Channel</th><th scope="col">Last activity</th></tr></thead>
              <tbody>${sessions.map((s) => html`<tr>
                <td data-label="Conversation"><div><a href="/conversations/${s.session_id}">${s.last_turn
                  ? html`<span class="preview">${s.last_turn.role === 'user' ? 'You' : s.agent_name}: ${preview(s.last_turn.text)}</span>`
                  : html`<span class="muted">No messages</span>`}</a><code class="session-id">${s.session_id}</code></div></td>
                <td data-label="Agent"><a href="/conversations/${s.session_id}">${s.agent_name}<span class="sr-only"> (conversation ${s.session_id})</span></a></td>
                <td data-label="Status">${sessionBadge(s.status, s.awaiting)}</td>
                <td data-label="Channel">${s.channel ?? '—'}</td>
                <td data-label="Last activity">${time(s.last_activity)}</td>
              </tr>`)}</tbody></table></div>`}
          ${next ? html`<p class="pager"><a class="btn btn-quiet" href="/conversations?older=${encodeURIComponent(next)}">Older conversations</a></p>` : ''}
        </section>`,
    });
  }));

  app.get('/conversations/:sessionId', authed<{ Params: { sessionId: string }; Querystring: { after?: string; before?: string } }>(async (request, reply, session) => {
    const { after, before } = request.query;
    // Opens at the latest messages, as the chat does; `before` and `after` page back and forth.
    const transcript = after
      ? await readTranscript(ctx, session.userId, request.params.sessionId, after)
      : await readLatest(ctx, session.userId, request.params.sessionId, before);
    if (!transcript) return errorPage(request, reply, 404, 'Conversation not found', 'You have no conversation with this id.');
    const agents = await ctx.services.agents.listForUser(session.userId);
    const agentName = agents.find((a) => a.agent_id === transcript.agent_id)?.name ?? transcript.agent_id;
    const first = transcript.messages[0];
    const last = transcript.messages.at(-1);
    const base = `/conversations/${transcript.session_id}`;
    const hasEarlier = 'has_earlier' in transcript ? transcript.has_earlier : true; // a page after a message has that message before it
    const hasLater = transcript.has_more;
    // Where a page other than the latest stands in the conversation (the latest needs no words).
    const where = !after && !before ? null
      : !hasEarlier ? (hasLater ? 'The start of the conversation.' : null)
      : hasLater ? 'Earlier messages of the conversation.' : 'The latest messages.';
    return render(request, reply, {
      title: `Conversation with ${agentName}`, nav: 'conversations',
      body: html`<p class="crumbs"><a href="/conversations">Conversations</a> / <code>${transcript.session_id}</code></p>
        <div class="head-row">
          <h1>Conversation with ${agentName}</h1>
          <p>${sessionBadge(transcript.status, transcript.awaiting.length)} <a class="btn btn-small" href="/chat?session=${transcript.session_id}">Continue in chat</a></p>
        </div>
        <section class="card" aria-labelledby="transcript-h">
          <h2 id="transcript-h" class="sr-only">Transcript</h2>
          ${where ? html`<p class="muted small">${where}${hasLater ? html` <a href="${base}">Go to the latest</a>` : ''}</p>` : ''}
          ${hasEarlier && first ? html`<p class="pager"><a class="btn btn-quiet" href="${base}?before=${encodeURIComponent(first.ts)}">Earlier messages</a></p>` : ''}
          ${messageList(transcript.messages, agentName)}
          ${hasLater && last ? html`<p class="pager"><a class="btn btn-quiet" href="${base}?after=${encodeURIComponent(last.ts)}">Later messages</a></p>` : ''}
        </section>`,
    });
  }));
}

/** A message cut to one short line for a list: whitespace folded, at most 80 characters (code points). */
export function preview(text: string, max = 80): string {
  const line = text.replace(/\s+/g, ' ').trim();
  const chars = [...line];
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : line;
}

/** A transcript the user may read, or null (missing, someone else's, or a malformed id). */
export async function readTranscript(ctx: WebContext, userId: string, sessionId: string, after?: string): Promise<TranscriptResult | null> {
  if (!looksLikeId('session', sessionId)) return null;
  return orNull(ctx.services.conversations.transcript(userId, sessionId, { limit: TRANSCRIPT_PAGE_SIZE, ...(after ? { after } : {}) }));
}

/** The newest messages of a transcript (before `before` when given), or null as readTranscript. */
export async function readLatest(ctx: WebContext, userId: string, sessionId: string, before?: string): Promise<LatestTranscript | null> {
  if (!looksLikeId('session', sessionId)) return null;
  return orNull(ctx.services.conversations.latestTranscript(userId, sessionId, { limit: TRANSCRIPT_PAGE_SIZE, ...(before ? { before } : {}) }));
}

async function orNull<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof Problem && (error.status === 404 || error.code === 'validation_failed')) return null;
    throw error;
  }
}

export type TranscriptMessage = TranscriptResult['messages'][number];

/** What follows a message inside its item (the chat's "Send again" after a failed turn). */
export type MessageExtra = (message: TranscriptMessage, index: number, messages: TranscriptMessage[]) => SafeHtml | '';

export function messageList(messages: TranscriptMessage[], agentName: string, extra?: MessageExtra): SafeHtml {
  return html`<ol class="chat-log" data-chat-log aria-live="polite">
    ${messages.length === 0 ? html`<li class="muted empty">No messages yet.</li>` : ''}
    ${messages.map((m, i) => messageItem(m, agentName, extra?.(m, i, messages)))}
  </ol>`;
}

/**
 * An error turn is marked "failed" (every error turn says the agent failed on the message); its
 * code, for whoever reads the API too, is in the title. app.js marks the turns it adds the same way.
 */
export function messageItem(m: TranscriptMessage, agentName: string, extra: SafeHtml | '' = ''): SafeHtml {
  return html`<li class="msg msg-${m.role}${m.error ? ' msg-error' : ''}" data-ts="${m.ts}">
    <div class="msg-meta"><span class="msg-who">${m.role === 'user' ? 'You' : agentName}</span> ${time(m.ts)}${m.error ? html` <span class="badge badge-error" title="Error code: ${m.error}">failed</span>` : ''}</div>
    <div class="msg-text">${m.text}</div>${extra}
  </li>`;
}
