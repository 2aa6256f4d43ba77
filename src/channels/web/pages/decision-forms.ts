import { REASON_MAX_LENGTH } from '../../../domain/problems.ts';
import { html, type SafeHtml } from '../html.ts';

/**
 * The forms that settle one pending action, as the inbox and the chat's cards show them: Approve,
 * Approve all of its kind, and Reject with an optional reason. `settle`: the chat's script sends
 * them without a reload.
 */
export function decisionForms(options: {
  action: string; hidden: SafeHtml; which: SafeHtml; kind: string; ofWhom: string; sameKind: string; reasonId: string; settle: boolean;
}): SafeHtml {
  const { action, hidden, which, kind, ofWhom, sameKind, reasonId } = options;
  const settle = options.settle ? html` data-settle` : '';
  return html`<form method="post" action="${action}" class="decide row"${settle}>
      ${hidden}
      <button type="submit" name="decision" value="approve" class="btn">Approve${which}</button>
      <button type="submit" name="decision" value="approve_same_type" class="btn btn-quiet" title="Approves this and every other pending “${kind}” action of ${ofWhom}">Approve all “${kind}”${sameKind}</button>
    </form>
    <form method="post" action="${action}" class="reject"${settle}>
      ${hidden}
      <input type="hidden" name="decision" value="reject">
      <label for="${reasonId}">Reason for rejecting${which} <span class="muted">(optional: the agent re-plans around it; without one the mission stops)</span></label>
      <div class="row">
        <input id="${reasonId}" name="reason" type="text" maxlength="${REASON_MAX_LENGTH}">
        <button type="submit" class="btn btn-danger-quiet">Reject${which}</button>
      </div>
    </form>`;
}
