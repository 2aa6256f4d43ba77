import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { looksLikeId } from '../../../domain/ids.ts';
import { Problem, TEXT_MAX_LENGTH } from '../../../domain/problems.ts';
import type { AgentView } from '../../../services/agents.ts';
import { authed, errorPage, formValue, render, wantsJson, type WebContext } from '../context.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, notice } from '../layout.ts';
import type { TranscriptResult } from '../../../services/conversations/schemas.ts';
import type { LatestTranscript } from '../../../services/conversations/transcripts.ts';
import { messageList, readLatest, readTranscript } from './conversations.ts';
import { sessionBadge, waitingNotice, waitingText, waitsForYou } from './waiting.ts';
import { awaitingCards } from './chat-awaiting.ts';
import { builtInAgentHelp, resendForms } from './chat-help.ts';
import { outcomeText } from './inbox.ts';
import { hangUpSignal } from '../../hang-up.ts';
import { channelIdempotencyKey } from '../../../domain/idempotency-keys.ts';

// Without JS the form post waits this long for the reply before showing the page (which, while
// the turn still runs, offers a link to look again: it never reloads by itself, which would wipe
// a half-written message). With JS it waits only a moment, so that quick replies come back at
// once and the page shows processing/queued for the rest, following the turn through the feed.
const NO_JS_WAIT_MS = 10_000;
const JS_WAIT_MS = 300;

type SessionStatus = TranscriptResult['status'];

/** Problems the chat form can run into, as the page says them. */
const ERROR_TEXT: Record<string, string> = {
  agent_required: 'Choose an agent to talk to.',
  text_empty: 'Write a message first.',
  text_too_long: `The message is too long: at most ${TEXT_MAX_LENGTH.toLocaleString('en')} characters.`,
};

const STATUS_TEXT: Record<SessionStatus, string> = {
  idle: '',
  processing: 'The agent is working on it…',
  queued: 'Queued: the agent is busy with something else and picks this up next…',
};

/** Chat: talks to an agent through the same pipeline as the API (channel "web"). */
export function chatRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get('/chat', authed<{ Querystring: { agent?: string; session?: string; done?: string; n?: string } }>(async (request, reply, session) => {
    const agents = await ctx.services.agents.listForUser(session.userId);
    let transcript: LatestTranscript | null = null;
    if (request.query.session) {
      transcript = await readLatest(ctx, session.userId, request.query.session);
      if (!transcript) return errorPage(request, reply, 404, 'Conversation not found', 'You have no conversation with this id.');
    }
    // A decision or an answer sent from this page without the script comes back here (inbox.ts's `back`).
    const { done, n } = request.query;
    const settled = done === 'approved' || done === 'rejected' || done === 'answered'
      ? outcomeText(done, Math.max(1, Math.min(1000, Number.parseInt(n ?? '1', 10) || 1))) : undefined;
    return chatPage(ctx, request, reply, { agents, transcript, selectedAgent: request.query.agent, settled });
  }));

  /**
   * The transcript as JSON for the chat page's script (same session cookie, same owner check),
   * with what its agent waits for in words and as the cards that settle it, as the page draws them.
   */
  app.get('/conversations/:sessionId/messages.json', authed<{ Params: { sessionId: string }; Querystring: { after?: string } }>(async (request, reply, session) => {
    const transcript = await readTranscript(ctx, session.userId, request.params.sessionId, request.query.after);
    if (!transcript) return reply.code(404).send({ error: 'session_not_found' });
    const waits = waitsForYou(transcript.status, transcript.awaiting.length);
    return reply.send({
      ...transcript,
      waiting_text: waitingText(transcript.awaiting),
      awaiting_html: waits ? awaitingCards(transcript.awaiting, { csrfToken: request.csrfToken, sessionId: transcript.session_id }).value : '',
    });
  }));

  app.post('/chat', authed(async (request, reply, session) => {
    const json = wantsJson(request);
    const text = formValue(request.body, 'text');
    const sessionId = formValue(request.body, 'session_id');
    const agentId = formValue(request.body, 'agent_id');
    // "Send again" after a failed turn: keyed by that turn, so that the retry is not taken for a
    // duplicate of the failed message (the duplicate window), and a second click is not a third try.
    const retryOf = formValue(request.body, 'retry_of');
    try {
      await takeChatAllowance(ctx, session.userId, reply);
      if (sessionId && !looksLikeId('session', sessionId)) throw new Problem('session_not_found', 'No such session.');
      const result = await ctx.services.conversations.submit({
        userId: session.userId, channel: 'web', text,
        ...(sessionId ? { sessionId } : {}),
        ...(!sessionId && agentId ? { agentId } : {}),
        ...(retryOf && sessionId ? { idempotencyKey: channelIdempotencyKey('web-retry', `${sessionId}:${retryOf.slice(0, 64)}`) } : {}),
        waitMs: Math.min(json ? JS_WAIT_MS : NO_JS_WAIT_MS, ctx.config.waitCeilingMs),
        signal: hangUpSignal(request, reply),
      });
      if (json) return reply.code(result.status === 'processing' || result.status === 'queued' ? 202 : 200).send(result);
      return reply.redirect(`/chat?session=${encodeURIComponent(result.session_id)}`, 303);
    } catch (error) {
      if (!(error instanceof Problem)) throw error;
      const failedSession = typeof error.extra.session_id === 'string' ? error.extra.session_id : null;
      if (json) return reply.code(error.status).send({ error: error.code, message: ERROR_TEXT[error.code] ?? error.message, ...(failedSession ? { session_id: failedSession } : {}) });
      // The failure is in the transcript as an error turn: show it there.
      if (failedSession) return reply.redirect(`/chat?session=${encodeURIComponent(failedSession)}`, 303);
      if (error.status === 404) return errorPage(request, reply, 404, error.title, error.message);
      const agents = await ctx.services.agents.listForUser(session.userId);
      const transcript = sessionId ? await readLatest(ctx, session.userId, sessionId) : null;
      const message = ERROR_TEXT[error.code] ?? error.message;
      return chatPage(ctx, request, reply, { agents, transcript, selectedAgent: agentId, error: message, text, status: error.status });
    }
  }));
}

/**
 * Each message sent through the chat counts against its person's allowance a minute
 * (WEB_CHAT_RATE_LIMIT_PER_MINUTE), in the same limiter as the API's keys, so that a signed-in
 * browser cannot flood the agents as a key could not. Over it, or when the limiter's store
 * cannot be reached, the message is not taken: a Problem the form shows, with Retry-After.
 */
async function takeChatAllowance(ctx: WebContext, userId: string, reply: FastifyReply): Promise<void> {
  let verdict;
  try {
    verdict = await ctx.rateLimiter.take(`web-chat:${userId}`, ctx.config.webChatRateLimitPerMinute);
  } catch {
    reply.header('Retry-After', '1');
    throw new Problem('service_unavailable', 'Messages cannot be sent just now. Try again in a moment.');
  }
  if (verdict.allowed) return;
  reply.header('Retry-After', String(verdict.resetSeconds));
  throw new Problem('rate_limited', `You have sent ${verdict.limit} messages in the last minute, the most allowed. `
    + `Try again in ${verdict.resetSeconds} second${verdict.resetSeconds === 1 ? '' : 's'}.`);
}

function chatPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, state: {
  agents: AgentView[]; transcript: LatestTranscript | null; selectedAgent?: string | undefined; error?: string; text?: string; status?: number;
  settled?: string | undefined;
}) {
  const { agents, transcript } = state;
  const agent = transcript ? agents.find((a) => a.agent_id === transcript.agent_id) : undefined;
  const agentName = agent?.name ?? (transcript ? transcript.agent_id : 'Agent');
  const status: SessionStatus = transcript?.status ?? 'idle';
  const lastTs = transcript?.messages.at(-1)?.ts ?? '';
  const firstTs = transcript?.messages[0]?.ts ?? '';

  let body: SafeHtml;
  if (!transcript && agents.length === 0) {
    body = html`<h1>Chat</h1>${notice('info', html`You have no agents yet. <a href="/agents">Create one</a> to start chatting.`)}`;
  } else {
    // Both headers are on the page; the script switches to the second once a new chat has started.
    body = html`<div class="head-row">
        <h1 data-chat-title>${transcript ? html`Chat with ${agentName}` : 'New chat'}</h1>
        <p>
          <span data-chat-badge${transcript ? '' : html` hidden`}>${sessionBadge(status, transcript?.awaiting.length ?? 0)}</span>
          <a class="btn btn-small btn-quiet" href="/chat" data-when-session${transcript ? '' : html` hidden`}>New chat</a>
          <a class="btn btn-small btn-quiet" href="/conversations" data-when-new${transcript ? html` hidden` : ''}>Earlier conversations</a>
        </p>
      </div>
      <section class="card chat" aria-label="Chat" data-chat data-session="${transcript?.session_id ?? ''}" data-status="${status}"
        data-last-ts="${lastTs}" data-agent-name="${agentName}">
        ${transcript?.has_earlier ? html`<p class="muted small earlier"><a href="/conversations/${transcript.session_id}?before=${encodeURIComponent(firstTs)}">Earlier messages</a> (showing the latest ${transcript.messages.length})</p>` : ''}
        <div class="chat-scroll" data-chat-scroll tabindex="0" role="region" aria-label="Transcript">
          ${transcript ? messageList(transcript.messages, agentName, resendForms(transcript, request.csrfToken)) : html`<ol class="chat-log" data-chat-log aria-live="polite"><li class="muted empty">Say hello to start a conversation.</li></ol>`}
        </div>
        <p class="chat-status" data-chat-status role="status" aria-live="polite">${status === 'idle' ? '' : html`<span class="spinner" aria-hidden="true"></span> ${STATUS_TEXT[status]}
          <noscript><a href="/chat?session=${transcript!.session_id}">Show the reply</a></noscript>`}</p>
        ${waitingNotice(transcript)}
        <div data-chat-awaiting>${transcript && waitsForYou(transcript.status, transcript.awaiting.length)
          ? awaitingCards(transcript.awaiting, { csrfToken: request.csrfToken, sessionId: transcript.session_id }) : ''}</div>
        <div class="chat-settled" role="status" data-settle-status>${state.settled ? html`<div class="notice notice-ok">${state.settled}</div>` : ''}</div>
        <div data-chat-error>${state.error ? notice('error', state.error) : ''}</div>
        <form method="post" action="/chat" class="chat-form" data-chat-form>
          ${csrfField(request.csrfToken)}
          ${transcript
            ? html`<input type="hidden" name="session_id" value="${transcript.session_id}">`
            : html`<div class="field">
                <label for="chat-agent">Agent</label>
                <select id="chat-agent" name="agent_id">
                  ${agents.map((a) => html`<option value="${a.agent_id}"${a.agent_id === state.selectedAgent ? html` selected` : ''}>${a.name}</option>`)}
                </select>
              </div>`}
          <div class="field">
            <label for="chat-text">Message</label>
            <textarea id="chat-text" name="text" rows="3" required data-max-chars="${TEXT_MAX_LENGTH}" aria-describedby="chat-text-hint" placeholder="Write a message…">${state.text ?? ''}</textarea>
            <p class="hint" id="chat-text-hint">Up to ${TEXT_MAX_LENGTH.toLocaleString('en')} characters.</p>
          </div>
          <div class="form-actions"><button type="submit" class="btn">Send</button> <span class="muted small" data-js-hint hidden>Ctrl+Enter sends</span></div>
        </form>
        ${ctx.config.model ? '' : builtInAgentHelp(!transcript)}
      </section>`;
  }
  return render(request, reply, {
    title: transcript ? `Chat with ${agentName}` : 'Chat', nav: 'chat', body, status: state.status ?? 200, error: Boolean(state.error),
  });
}
