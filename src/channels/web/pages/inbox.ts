import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { WebSession } from '../../../services/web-sessions.ts';
import { authed, formValue, render, type WebContext } from '../context.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, notice, time } from '../layout.ts';
import { TEXT_MAX_LENGTH } from '../../../domain/problems.ts';
import { DECISIONS, REASON_MAX_LENGTH as REASON_MAX, type Decision } from '../../../services/missions.ts';


/** How many actions and questions wait for the user. */
export async function inboxCounts(ctx: WebContext, userId: string): Promise<{ actions: number; questions: number }> {
  const [{ actions }, { questions }] = await Promise.all([
    ctx.services.missions.listActions(userId), ctx.services.missions.listQuestions(userId),
  ]);
  return { actions: actions.length, questions: questions.length };
}

/** Inbox: pending actions to approve or reject, and open questions to answer. */
export function inboxRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get('/inbox', authed<{ Querystring: { done?: string; n?: string } }>(async (request, reply, session) => {
    const { done, n } = request.query;
    const count = Math.max(0, Math.min(1000, Number.parseInt(n ?? '1', 10) || 1));
    const message = done === 'approved' ? notice('ok', count > 1 ? `Approved ${count} actions. The agent carries on.` : 'Approved. The agent carries on.')
      : done === 'rejected' ? notice('ok', 'Rejected. The agent has been told.')
      : done === 'answered' ? notice('ok', 'Answer accepted. The agent carries on.')
      : null;
    return inboxPage(ctx, request, reply, session, { message });
  }));

  app.post('/inbox/actions/:operationId', authed<{ Params: { operationId: string } }>(async (request, reply, session) => {
    const decision = formValue(request.body, 'decision') as Decision;
    const reason = formValue(request.body, 'reason').trim();
    if (!(DECISIONS as readonly string[]).includes(decision)) {
      return inboxPage(ctx, request, reply, session, { status: 422, message: notice('error', 'Choose approve, approve all of this kind, or reject.') });
    }
    const entry = { operation_id: request.params.operationId, decision, ...(decision === 'reject' && reason ? { reason } : {}) };
    const { results: [result] } = await ctx.services.missions.decide(session.userId, [entry]);
    if (!result?.ok) {
      const code = result?.error.code;
      const status = code === 'not_found' ? 404 : code === 'invalid_decision' ? 422 : 409;
      const text = code === 'not_found' ? 'There is no pending action with this id.'
        : code === 'already_settled' ? 'This action was already settled.' : (result?.error.message ?? 'The decision could not be recorded.');
      return inboxPage(ctx, request, reply, session, { status, message: notice('error', text) });
    }
    const n = 1 + result.also_approved.length;
    return reply.redirect(`/inbox?done=${result.outcome === 'rejected' ? 'rejected' : 'approved'}&n=${n}`, 303);
  }));

  app.post('/inbox/questions/:requestId', authed<{ Params: { requestId: string } }>(async (request, reply, session) => {
    const requestId = request.params.requestId;
    const text = formValue(request.body, 'text');
    if (!text.trim()) {
      return inboxPage(ctx, request, reply, session, { status: 422, refused: { requestId, reason: 'Write an answer first.', text } });
    }
    const { results: [result] } = await ctx.services.missions.answer(session.userId, [{ request_id: requestId, text }]);
    if (result?.ok && result.accepted) return reply.redirect('/inbox?done=answered', 303);
    if (result?.ok) {
      return inboxPage(ctx, request, reply, session, { status: 422, refused: { requestId, reason: result.reason, text } });
    }
    const code = result?.error.code;
    const message = code === 'not_found' ? 'There is no open question with this id.'
      : code === 'already_answered' ? 'This question was already answered.' : (result?.error.message ?? 'The answer could not be recorded.');
    return inboxPage(ctx, request, reply, session, { status: code === 'not_found' ? 404 : 409, message: notice('error', message) });
  }));
}

async function inboxPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: {
  message?: SafeHtml | null; status?: number; refused?: { requestId: string; reason: string; text: string };
}) {
  const [{ actions }, { questions }, agents] = await Promise.all([
    ctx.services.missions.listActions(session.userId),
    ctx.services.missions.listQuestions(session.userId),
    ctx.services.agents.listForUser(session.userId),
  ]);
  const agentName = (id: string) => agents.find((a) => a.agent_id === id)?.name ?? id;
  const others = new Map<string, string>();
  for (const q of questions) {
    if (q.asked_of !== session.userId && !others.has(q.asked_of)) {
      others.set(q.asked_of, (await ctx.services.accounts.findById(q.asked_of))?.email ?? 'another member');
    }
  }
  const kindsCount = new Map<string, number>();
  for (const a of actions) kindsCount.set(`${a.agent_id} ${a.kind}`, (kindsCount.get(`${a.agent_id} ${a.kind}`) ?? 0) + 1);

  return render(request, reply, {
    title: 'Inbox', nav: 'inbox', status: state.status ?? 200,
    body: html`<h1>Inbox</h1>
      ${state.message}
      <section aria-labelledby="actions-h">
        <h2 id="actions-h">Actions waiting for your permission <span class="count">${actions.length}</span></h2>
        ${actions.length === 0 ? html`<p class="card muted">Nothing to approve.</p>` : html`<ul class="cards">${actions.map((a) => {
          const sameKind = kindsCount.get(`${a.agent_id} ${a.kind}`) ?? 1;
          return html`<li class="card item" id="${a.operation_id}">
            <div class="item-head"><span class="badge badge-kind">${a.kind}</span> <strong class="item-title">${a.summary}</strong></div>
            <p class="muted small">${agentName(a.agent_id)} · <a href="/conversations/${a.session_id}">conversation</a> · ${time(a.created_at)} · <code>${a.operation_id}</code></p>
            ${detailsBlock(a.details, a)}
            <form method="post" action="/inbox/actions/${a.operation_id}" class="decide">
              ${csrfField(request.csrfToken)}
              <div class="field">
                <label for="reason-${a.operation_id}">Reason <span class="muted">(optional, used when rejecting: the agent re-plans around it; without one the mission stops)</span></label>
                <input id="reason-${a.operation_id}" name="reason" type="text" maxlength="${REASON_MAX}">
              </div>
              <div class="row">
                <button type="submit" name="decision" value="approve" class="btn">Approve</button>
                <button type="submit" name="decision" value="approve_same_type" class="btn btn-quiet" title="Approves this and every other pending “${a.kind}” action of ${agentName(a.agent_id)}">Approve all “${a.kind}”${sameKind > 1 ? ` (${sameKind})` : ''}</button>
                <button type="submit" name="decision" value="reject" class="btn btn-danger-quiet">Reject</button>
              </div>
            </form>
          </li>`;
        })}</ul>`}
      </section>
      <section aria-labelledby="questions-h">
        <h2 id="questions-h">Open questions <span class="count">${questions.length}</span></h2>
        ${questions.length === 0 ? html`<p class="card muted">No open questions.</p>` : html`<ul class="cards">${questions.map((q) => {
          const refused = state.refused?.requestId === q.request_id ? state.refused : undefined;
          return html`<li class="card item" id="${q.request_id}">
            <div class="item-head"><strong class="item-title">${q.text}</strong> <span class="badge">${answerHint(q.answer_type)}</span></div>
            <p class="muted small">${agentName(q.agent_id)} · <a href="/conversations/${q.session_id}">conversation</a> · ${time(q.created_at)} · ${q.asked_of === session.userId ? 'asked of you' : `asked of ${others.get(q.asked_of) ?? 'another member'}`}</p>
            <form method="post" action="/inbox/questions/${q.request_id}" class="answer">
              ${csrfField(request.csrfToken)}
              <div class="field${refused ? ' has-error' : ''}">
                <label for="answer-${q.request_id}">Your answer</label>
                <div class="row">
                  <input id="answer-${q.request_id}" name="text" type="text" required maxlength="${TEXT_MAX_LENGTH}" value="${refused?.text ?? ''}"${refused ? html` aria-invalid="true" aria-describedby="answer-${q.request_id}-error"` : ''}>
                  <button type="submit" class="btn">Answer</button>
                </div>
                ${refused ? html`<p class="error" id="answer-${q.request_id}-error" role="alert">Not accepted: ${refused.reason}</p>` : ''}
              </div>
            </form>
          </li>`;
        })}</ul>`}
      </section>`,
  });
}

/** The action's details, leaving out what the card already shows (its kind and summary). */
function detailsBlock(details: unknown, shown: { kind: string; summary: string }): SafeHtml {
  let value = details;
  if (typeof value === 'string') {
    try { value = JSON.parse(value); } catch { /* shown as text */ }
  }
  if (value === null || value === undefined || value === '') return html``;
  if (typeof value === 'object' && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([k, v]) => !((k === 'kind' && v === shown.kind) || (k === 'summary' && v === shown.summary)));
    if (entries.length === 0) return html``;
    return html`<dl class="facts small">${entries.map(([k, v]) => html`<dt>${k}</dt><dd>${typeof v === 'string' ? v : JSON.stringify(v)}</dd>`)}</dl>`;
  }
  return html`<pre class="details">${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}</pre>`;
}


/** How the inbox names the kind of answer a question expects. */
function answerHint(answerType: string): string {
  const choice = /^choice:(.+)$/.exec(answerType);
  if (choice) return `one of: ${choice[1]!.split('|').join(', ')}`;
  return ({ text: 'text', number: 'a number', date: 'a date, YYYY-MM-DD', email: 'an email address', yesno: 'yes or no' } as Record<string, string>)[answerType] ?? answerType;
}
