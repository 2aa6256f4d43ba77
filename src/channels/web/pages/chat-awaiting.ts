import { TEXT_MAX_LENGTH } from '../../../domain/problems.ts';
import type { AwaitingItem } from '../../../services/missions/schemas.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField } from '../layout.ts';
import { decisionForms } from './decision-forms.ts';
import { answerHint, cardContext } from './inbox.ts';

/**
 * The chat's cards for what its agent waits for (contract §9.2's `awaiting`): each action with its
 * Approve, Approve all of its kind and Reject (an optional reason), each question with buttons for
 * a yes/no or a choice, else an answer box. They post to the inbox's forms, which come back to the
 * chat (`back`) once the decision or answer is taken; the page's script sends them without a
 * reload and draws them again from the server (messages.json's `awaiting_html`).
 */
export function awaitingCards(items: readonly AwaitingItem[], options: { csrfToken: string; sessionId: string }): SafeHtml {
  if (items.length === 0) return html``;
  const back = `/chat?session=${options.sessionId}`;
  const hidden = html`${csrfField(options.csrfToken)}<input type="hidden" name="back" value="${back}">`;
  return html`<ul class="cards chat-cards">${items.map((item) => (item.type === 'action' ? actionCard(item, hidden) : questionCard(item, hidden)))}</ul>`;
}

function actionCard(item: Extract<AwaitingItem, { type: 'action' }>, hidden: SafeHtml): SafeHtml {
  const id = item.operation_id;
  const which = cardContext(item.summary);
  const action = `/inbox/actions/${id}`;
  return html`<li class="card item chat-card" data-awaiting="${id}">
    <div class="item-head"><span class="badge badge-kind">${item.kind}</span> <h2 class="item-title">${item.summary}</h2></div>
    <p class="muted small">The agent asks your permission for this action.</p>
    ${decisionForms({ action, hidden, which, kind: item.kind, ofWhom: 'this agent', sameKind: '', reasonId: `chat-reason-${id}`, settle: true })}
    <p class="error" data-settle-error role="alert" hidden></p>
  </li>`;
}

/** The answers a question's type offers as buttons: yes and no, or its choices; none for a typed answer. */
function answerButtons(answerType: string): string[] {
  if (answerType === 'yesno') return ['yes', 'no'];
  const choice = /^choice:(.+)$/.exec(answerType);
  return choice ? choice[1]!.split('|').map((option) => option.trim()).filter(Boolean) : [];
}

/** The input that fits a typed answer (the agent still judges it). */
const INPUT_TYPE: Record<string, string> = { number: 'text', date: 'date', email: 'email', text: 'text' };

function questionCard(item: Extract<AwaitingItem, { type: 'question' }>, hidden: SafeHtml): SafeHtml {
  const id = item.request_id;
  const which = cardContext(item.text);
  const buttons = answerButtons(item.answer_type);
  const type = INPUT_TYPE[item.answer_type] ?? 'text';
  return html`<li class="card item chat-card" data-awaiting="${id}">
    <div class="item-head"><h2 class="item-title" id="chat-${id}-text">${item.text}</h2> <span class="badge" id="chat-${id}-type"><span class="sr-only">Expects </span>${answerHint(item.answer_type)}</span></div>
    <form method="post" action="/inbox/questions/${id}" class="answer" data-settle>
      ${hidden}
      ${buttons.length > 0
        ? html`<div class="row" role="group" aria-labelledby="chat-${id}-text">${buttons.map((option, i) => html`<button type="submit" name="text" value="${option}" class="btn${i === 0 ? '' : ' btn-quiet'}">${option[0]!.toUpperCase()}${option.slice(1)}${which}</button>`)}</div>`
        : html`<div class="field">
            <label for="chat-answer-${id}">Your answer${which}</label>
            <div class="row">
              <input id="chat-answer-${id}" name="text" type="${type}" required maxlength="${TEXT_MAX_LENGTH}" aria-describedby="chat-${id}-text chat-${id}-type"${item.answer_type === 'number' ? html` inputmode="decimal"` : ''}>
              <button type="submit" class="btn">Answer${which}</button>
            </div>
          </div>`}
    </form>
    <p class="error" data-settle-error role="alert" hidden></p>
  </li>`;
}
