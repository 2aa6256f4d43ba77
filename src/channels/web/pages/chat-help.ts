import type { TranscriptResult } from '../../../services/conversations/schemas.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField } from '../layout.ts';
import type { MessageExtra, TranscriptMessage } from './conversations.ts';

/**
 * What the built-in agent (contract §8) does, for a newcomer to try: shown in the chat while no
 * model is configured, open on a new chat. Plain `<details>`: it opens and closes without a script.
 */
export function builtInAgentHelp(open: boolean): SafeHtml {
  const directive = (example: string, what: string) => html`<dt><code>${example}</code></dt><dd>${what}</dd>`;
  return html`<details class="chat-help"${open ? html` open` : ''}>
    <summary>Try the built-in agent</summary>
    <p class="small">No model is configured, so agents answer with the built-in agent: it says back what you write (“You said: …”) and follows these directives at the start of a message.</p>
    <dl class="directives small">
      ${directive('!sleep 3000 hello', 'works for 3 seconds (at most 600,000 ms), then answers “hello”.')}
      ${directive('!fail', 'fails the turn: the message is marked failed, with “Send again”.')}
      ${directive('!action email Send the report', 'asks your permission for an action of that kind: approve or reject it here, or in the inbox.')}
      ${directive('!ask yesno Proceed?', 'asks you a question; the type is text, number, date, email, yesno or choice:a|b|c.')}
      ${directive('!ask-user someone@example.com text Which room?', 'asks another member of the agent’s workspace, in their inbox.')}
    </dl>
  </details>`;
}

/**
 * The message each agent turn answers, by the turn's ts: the transcript's turns in order, each
 * agent turn taking the oldest user message not yet answered (an agent works through its messages
 * in order). A turn that answers nothing (a mission's next step) takes none. app.js's retryText
 * pairs them the same way.
 */
function answeredMessages(messages: readonly TranscriptMessage[]): Map<string, TranscriptMessage> {
  const waiting: TranscriptMessage[] = [];
  const answered = new Map<string, TranscriptMessage>();
  for (const m of messages) {
    if (m.role === 'user') waiting.push(m);
    else {
      const message = waiting.shift();
      if (message) answered.set(m.ts, message);
    }
  }
  return answered;
}

/**
 * "Send again" after a turn the agent failed on: a form that sends its message once more through
 * the chat's own form post (with the failed turn's ts as `retry_of`, see chat.ts).
 */
export function resendForms(transcript: Pick<TranscriptResult, 'session_id' | 'messages'>, csrfToken: string): MessageExtra {
  const answered = answeredMessages(transcript.messages);
  return (m) => {
    const message = m.error === 'agent_failed' ? answered.get(m.ts) : undefined;
    if (!message) return '';
    return html`<form method="post" action="/chat" class="resend" data-resend>
      ${csrfField(csrfToken)}
      <input type="hidden" name="session_id" value="${transcript.session_id}">
      <input type="hidden" name="retry_of" value="${m.ts}">
      <input type="hidden" name="text" value="${message.text}">
      <button type="submit" class="btn btn-small btn-quiet">Send again</button>
    </form>`;
  };
}
