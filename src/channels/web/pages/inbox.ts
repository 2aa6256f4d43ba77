import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { WebSession } from '../../../services/web-sessions.ts';
import { authed, formValue, render, wantsJson, type WebContext } from '../context.ts';
import { setFlash, takeFlash, type Flash } from '../flash.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, notice, time } from '../layout.ts';
import { looksLikeId } from '../../../domain/ids.ts';
import { PAGE_LIMIT } from '../../../domain/paging.ts';
import { REASON_MAX_LENGTH as REASON_MAX, TEXT_MAX_LENGTH } from '../../../domain/problems.ts';
import { DECISIONS, type Decision } from '../../../services/missions/schemas.ts';
import { preview } from './conversations.ts';
import { waitingOnYou } from './waiting.ts';
import { decisionForms } from './decision-forms.ts';

/** The most actions, and questions, the inbox shows at once (the oldest first): the largest page a list gives. */
const INBOX_SHOWS = PAGE_LIMIT.max;

const INBOX_PATH = '/inbox';
const REFUSED_FLASH: Flash = { cookie: 'ac_inbox_refused', path: INBOX_PATH, purpose: 'inbox-refused', ttlMs: 10 * 60_000 };
// A cookie holds about 4 KB: a longer answer is not kept in the field after a refusal.
const KEPT_ANSWER_MAX_BYTES = 1500;

/** What went wrong with a decision or an answer, as the page says it (keyed by a code in the URL). */
const ERRORS: Record<string, string> = {
  not_found: 'There is no pending action with this id.',
  already_settled: 'This action was already settled.',
  invalid_decision: `The decision could not be recorded. Choose approve, approve all of this kind, or reject; a reason may have at most ${REASON_MAX} characters.`,
  question_not_found: 'There is no open question with this id.',
  already_answered: 'This question was already answered.',
  failed: 'That could not be recorded. Reload the page and try again.',
};

/** How an action was settled before a decision came, as the end of a sentence. */
const SETTLED = {
  approved: 'was already approved.',
  rejected: 'was already rejected.',
  closed: 'was closed without a decision: its conversation or its agent is gone, you are no longer in its workspace, or the conversation\'s work was cancelled.',
} as const;

interface Refused {
  requestId: string;
  reason: string;
  text: string;
}

/**
 * Inbox: pending actions to approve or reject, and open questions to answer. Every form post
 * ends in a redirect (so a reload never posts again): outcomes and errors travel as a code in
 * the URL; a refused answer's reason and text travel in a sealed session cookie.
 */
export function inboxRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get(INBOX_PATH, authed<{ Querystring: { done?: string; n?: string; error?: string; op?: string; refused?: string } }>(async (request, reply, session) => {
    const { done, n, error, op } = request.query;
    const count = Math.max(0, Math.min(1000, Number.parseInt(n ?? '1', 10) || 1));
    // A decision that came too late names the action and how it was settled (the caller's own only).
    const settled = op && (error === 'already_settled' || error === 'not_found') ? await ctx.services.missions.settledAction(session.userId, op) : null;
    const problem = settled ? `Your decision was not recorded: “${settled.summary}” ${SETTLED[settled.outcome]}`
      : error && Object.hasOwn(ERRORS, error) ? ERRORS[error]!
      : null;
    const outcome = done === 'approved' || done === 'rejected' || done === 'answered' ? outcomeText(done, count) : null;
    const message = outcome ? notice('ok', outcome) : problem ? notice('error', problem) : null;
    const failed = !outcome && problem !== null;
    let refused: Refused | undefined;
    // Shown once: a reload shows the question as it is now.
    const flash = takeFlash(ctx.sealer, request, reply, REFUSED_FLASH, session.userId);
    const wanted = request.query.refused;
    if (flash && typeof wanted === 'string' && wanted) {
      const sealed = flash.value as Refused | null;
      // Unreadable (too old, or tampered with): still say that it was refused.
      refused = sealed?.requestId === wanted ? sealed : { requestId: wanted, reason: 'The agent did not accept this answer. Try again.', text: '' };
    }
    return inboxPage(ctx, request, reply, session, { message, refused, failed });
  }));

  app.post(`${INBOX_PATH}/actions/:operationId`, authed<{ Params: { operationId: string } }>(async (request, reply, session) => {
    const decision = formValue(request.body, 'decision') as Decision;
    const reason = formValue(request.body, 'reason').trim();
    const json = wantsJson(request);
    const back = chatBack(formValue(request.body, 'back'));
    if (!(DECISIONS as readonly string[]).includes(decision)) {
      return json ? reply.code(422).send({ ok: false, error: 'invalid_decision', message: ERRORS.invalid_decision }) : reply.redirect(`${INBOX_PATH}?error=invalid_decision`, 303);
    }
    const entry = { operation_id: request.params.operationId, decision, ...(decision === 'reject' && reason ? { reason } : {}) };
    const { results: [result] } = await ctx.services.missions.decide(session.userId, [entry]);
    if (!result?.ok) {
      const code = result?.error.code;
      const known = code && Object.hasOwn(ERRORS, code) ? code : 'failed';
      if (json) return reply.code(409).send({ ok: false, error: known, message: ERRORS[known] });
      const named = code === 'already_settled' || code === 'not_found' ? `&op=${encodeURIComponent(request.params.operationId)}` : '';
      return reply.redirect(`${INBOX_PATH}?error=${known}${named}`, 303);
    }
    const n = 1 + result.also_approved.length;
    const done = result.outcome === 'rejected' ? 'rejected' : 'approved';
    if (json) return reply.send({ ok: true, outcome: done, message: outcomeText(done, n) });
    return reply.redirect(`${back ? `${back}&` : `${INBOX_PATH}?`}done=${done}&n=${n}`, 303);
  }));

  app.post(`${INBOX_PATH}/questions/:requestId`, authed<{ Params: { requestId: string } }>(async (request, reply, session) => {
    const requestId = request.params.requestId;
    const text = formValue(request.body, 'text');
    const json = wantsJson(request);
    const back = chatBack(formValue(request.body, 'back'));
    const refuse = (reason: string) => {
      if (json) return reply.code(422).send({ ok: true, accepted: false, message: `Not accepted: ${reason}` });
      const kept = Buffer.byteLength(text) <= KEPT_ANSWER_MAX_BYTES ? text : '';
      setFlash(ctx.sealer, request, reply, REFUSED_FLASH, session.userId, { requestId, reason: reason.slice(0, 500), text: kept });
      return reply.redirect(`${INBOX_PATH}?refused=${encodeURIComponent(requestId)}#${encodeURIComponent(requestId)}`, 303);
    };
    if (!text.trim()) return refuse('Write an answer first.');
    const { results: [result] } = await ctx.services.missions.answer(session.userId, [{ request_id: requestId, text }]);
    if (result?.ok && result.accepted) {
      return json ? reply.send({ ok: true, accepted: true, message: outcomeText('answered', 1) }) : reply.redirect(`${back ? `${back}&` : `${INBOX_PATH}?`}done=answered`, 303);
    }
    // A refusal always says why (the result's shape leaves `reason` optional: an accepted answer has none).
    if (result?.ok) return refuse(result.reason ?? 'The answer was not accepted.');
    const code = result?.error.code === 'not_found' ? 'question_not_found' : result?.error.code === 'already_answered' ? 'already_answered' : 'failed';
    if (json) return reply.code(409).send({ ok: false, error: code, message: ERRORS[code] });
    return reply.redirect(`${INBOX_PATH}?error=${code}`, 303);
  }));
}

/** What a decision or an answer taken did, as the page says it. */
export function outcomeText(done: 'approved' | 'rejected' | 'answered', count: number): string {
  if (done === 'approved') return count > 1 ? `Approved ${count} actions. The agent carries on.` : 'Approved. The agent carries on.';
  return done === 'rejected' ? 'Rejected. The agent has been told.' : 'Answer accepted. The agent carries on.';
}

/**
 * Where a form sent from the chat goes back to once taken: that chat (the only page besides the
 * inbox with these forms), or null for the inbox. Nothing else is followed (no open redirect).
 */
function chatBack(value: string): string | null {
  const sessionId = /^\/chat\?session=([^&#]+)$/.exec(value)?.[1];
  return sessionId && looksLikeId('session', sessionId) ? value : null;
}

async function inboxPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: {
  message?: SafeHtml | null; refused?: Refused | undefined; failed?: boolean;
}) {
  const [{ actions, has_more: moreActions }, { questions, has_more: moreQuestions }, agents, workspaces] = await Promise.all([
    ctx.services.missions.listActions(session.userId, { limit: INBOX_SHOWS }),
    ctx.services.missions.listQuestions(session.userId, { limit: INBOX_SHOWS }),
    ctx.services.agents.listForUser(session.userId),
    ctx.services.accounts.workspacesOf(session.userId),
  ]);
  // Counted only when a list has more than it shows (rarely): otherwise its length is the count.
  const counts = moreActions || moreQuestions ? await waitingOnYou(ctx, session.userId) : { actions: actions.length, questions: questions.length };
  const agentName = (id: string) => agents.find((a) => a.agent_id === id)?.name ?? id;
  // A question may be put to you in someone else's conversation (`!ask-user`), which you cannot
  // open: it is linked only for whom it opens; for the others, the agent's workspace says whose
  // agent asks (its name as your account page shows it: "alice@…'s personal workspace").
  const yourSessions = new Set((await Promise.all([...new Set(questions.map((q) => q.session_id))]
    .map((id) => ctx.services.conversations.findOwnSession(session.userId, id)))).flatMap((s) => (s ? [s.id] : [])));
  const workspaceOfAgent = (id: string) => {
    const workspaceId = agents.find((a) => a.agent_id === id)?.workspace_id;
    return workspaces.find((w) => w.workspace_id === workspaceId)?.name;
  };
  const others = new Map<string, string>();
  for (const q of questions) {
    if (q.asked_of !== session.userId && !others.has(q.asked_of)) {
      others.set(q.asked_of, (await ctx.services.accounts.findById(q.asked_of))?.email ?? 'another member');
    }
  }
  const kindsCount = new Map<string, number>();
  for (const a of actions) kindsCount.set(`${a.agent_id} ${a.kind}`, (kindsCount.get(`${a.agent_id} ${a.kind}`) ?? 0) + 1);

  return render(request, reply, {
    title: 'Inbox', nav: 'inbox', error: Boolean(state.failed || state.refused),
    body: html`<h1>Inbox</h1>
      ${state.message}
      <section aria-labelledby="actions-h">
        <h2 id="actions-h">Actions waiting for your permission <span class="count">${counts.actions}</span></h2>
        ${moreActions ? html`<p class="muted">The oldest ${actions.length} are shown; the rest appear here as you settle these.</p>` : ''}
        ${actions.length === 0 ? html`<p class="card muted">Nothing to approve.</p>` : html`<ul class="cards">${actions.map((a) => {
          const sameKind = kindsCount.get(`${a.agent_id} ${a.kind}`) ?? 1;
          const action = `${INBOX_PATH}/actions/${a.operation_id}`;
          const which = cardContext(a.summary);
          return html`<li class="card item" id="${a.operation_id}">
            <div class="item-head"><span class="badge badge-kind">${a.kind}</span> <h3 class="item-title">${a.summary}</h3></div>
            <p class="muted small">${agentName(a.agent_id)} · <a href="/conversations/${a.session_id}">conversation${which}</a> · ${time(a.created_at)} · <code>${a.operation_id}</code></p>
            ${detailsBlock(a.details, a)}
            ${decisionForms({
              action, hidden: csrfField(request.csrfToken), which, kind: a.kind, ofWhom: agentName(a.agent_id),
              sameKind: sameKind > 1 && !moreActions ? ` (${sameKind})` : '', reasonId: `reason-${a.operation_id}`, settle: false,
            })}
          </li>`;
        })}</ul>`}
      </section>
      <section aria-labelledby="questions-h">
        <h2 id="questions-h">Open questions <span class="count">${counts.questions}</span></h2>
        ${moreQuestions ? html`<p class="muted">The oldest ${questions.length} are shown; the rest appear here as you answer these.</p>` : ''}
        ${questions.length === 0 ? html`<p class="card muted">No open questions.</p>` : html`<ul class="cards">${questions.map((q) => {
          const refused = state.refused?.requestId === q.request_id ? state.refused : undefined;
          const which = cardContext(q.text);
          const id = q.request_id;
          // The field is described by the question and the kind of answer it expects (and why the last one was refused).
          const describedBy = `${id}-text ${id}-type${refused ? ` answer-${id}-error` : ''}`;
          return html`<li class="card item" id="${id}">
            <div class="item-head"><h3 class="item-title" id="${id}-text">${q.text}</h3> <span class="badge" id="${id}-type"><span class="sr-only">Expects </span>${answerHint(q.answer_type)}</span></div>
            <p class="muted small">${yourSessions.has(q.session_id)
              ? html`${agentName(q.agent_id)} · <a href="/conversations/${q.session_id}">conversation${which}</a> · ${time(q.created_at)} · ${q.asked_of === session.userId ? 'asked of you' : `asked of ${others.get(q.asked_of) ?? 'another member'}`}`
              : html`${agentName(q.agent_id)} · ${time(q.created_at)} · asked of you${workspaceOfAgent(q.agent_id) ? ` by an agent of ${workspaceOfAgent(q.agent_id)}` : ''}, in a conversation that is not yours`}</p>
            <form method="post" action="${INBOX_PATH}/questions/${id}" class="answer">
              ${csrfField(request.csrfToken)}
              <div class="field${refused ? ' has-error' : ''}">
                <label for="answer-${id}">Your answer${which}</label>
                <div class="row">
                  <input id="answer-${id}" name="text" type="text" required maxlength="${TEXT_MAX_LENGTH}" value="${refused?.text ?? ''}" aria-describedby="${describedBy}"${refused ? html` aria-invalid="true"` : ''}>
                  <button type="submit" class="btn">Answer${which}</button>
                </div>
                ${refused ? html`<p class="error" id="answer-${q.request_id}-error" role="alert">Not accepted: ${refused.reason}</p>` : ''}
              </div>
            </form>
          </li>`;
        })}</ul>`}
      </section>`,
  });
}

/**
 * Which card a control belongs to, for screen readers only (as the keys page's "Revoke<hidden
 * label>"): every card has an Approve, a Reject, an answer field…, and a list of their names
 * should tell them apart. The card's title, cut to one short line.
 */
export function cardContext(title: string): SafeHtml {
  return html`<span class="sr-only"> “${preview(title, 60)}”</span>`;
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

/** How the inbox (and the chat) names the kind of answer a question expects. */
export function answerHint(answerType: string): string {
  const choice = /^choice:(.+)$/.exec(answerType);
  if (choice) return `one of: ${choice[1]!.split('|').join(', ')}`;
  return ({ text: 'text', number: 'a number', date: 'a date, YYYY-MM-DD', email: 'an email address', yesno: 'yes or no' } as Record<string, string>)[answerType] ?? answerType;
}
