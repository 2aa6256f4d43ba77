import type { InlineKeyboardButton, InlineKeyboardMarkup } from 'grammy/types';

/** Telegram's longest message text, in UTF-16 code units (as Telegram counts). */
export const MESSAGE_LIMIT = 4096;
/** Telegram's most bytes of a button's callback data. */
export const CALLBACK_DATA_LIMIT = 64;

/**
 * A text cut into messages Telegram takes: at most MESSAGE_LIMIT each, cut at the last line
 * break (else space) in the second half of a piece, never inside a surrogate pair.
 */
export function splitMessage(text: string, limit = MESSAGE_LIMIT): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    let cut = limit;
    // Searched up to limit - 1: the cut goes after the break, so the piece keeps it and stays within the limit.
    const newline = rest.lastIndexOf('\n', limit - 1);
    const space = rest.lastIndexOf(' ', limit - 1);
    if (newline >= limit / 2) cut = newline + 1;
    else if (space >= limit / 2) cut = space + 1;
    const code = rest.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut -= 1; // a high surrogate stays with its low half
    pieces.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (rest.length > 0 || pieces.length === 0) pieces.push(rest);
  return pieces;
}

/** What a button asks for, written in its callback data (a letter, then ids; ≤ 64 bytes). */
export type ButtonIntent =
  | { do: 'approve' | 'approve_same_type' | 'reject'; operationId: string }
  | { do: 'answer'; requestId: string; choice: number }
  | { do: 'choose_agent'; agentId: string };

const LETTERS = { approve: 'a', approve_same_type: 's', reject: 'r' } as const;

export function callbackData(intent: ButtonIntent): string {
  let data: string;
  if (intent.do === 'answer') data = `q:${intent.requestId}:${intent.choice}`;
  else if (intent.do === 'choose_agent') data = `g:${intent.agentId}`;
  else data = `${LETTERS[intent.do]}:${intent.operationId}`;
  if (Buffer.byteLength(data) > CALLBACK_DATA_LIMIT) throw new Error(`callback data over ${CALLBACK_DATA_LIMIT} bytes: ${data}`);
  return data;
}

/** A button's intent, or null for data this bot never made. */
export function parseCallbackData(data: string): ButtonIntent | null {
  const match = /^([asrgq]):([A-Za-z0-9_]{1,40})(?::(\d{1,3}))?$/.exec(data);
  if (!match) return null;
  const [, letter, id, choice] = match as unknown as [string, string, string, string | undefined];
  if (letter === 'q') return choice === undefined ? null : { do: 'answer', requestId: id, choice: Number(choice) };
  if (choice !== undefined) return null;
  if (letter === 'g') return { do: 'choose_agent', agentId: id };
  return { do: letter === 'a' ? 'approve' : letter === 's' ? 'approve_same_type' : 'reject', operationId: id };
}

const button = (text: string, intent: ButtonIntent): InlineKeyboardButton => ({ text, callback_data: callbackData(intent) });

export function actionKeyboard(operationId: string, kind: string): InlineKeyboardMarkup {
  const shownKind = kind.length > 24 ? `${kind.slice(0, 23)}…` : kind;
  return { inline_keyboard: [
    [button('Approve', { do: 'approve', operationId }), button(`Approve all "${shownKind}"`, { do: 'approve_same_type', operationId })],
    [button('Reject', { do: 'reject', operationId })],
  ] };
}

/** The answers a question's type offers as buttons: yes/no, or its choices; null for a typed answer. */
export function buttonAnswers(answerType: string): string[] | null {
  if (answerType === 'yesno') return ['yes', 'no'];
  if (answerType.startsWith('choice:')) return answerType.slice('choice:'.length).split('|').filter((c) => c !== '');
  return null;
}

export function questionKeyboard(requestId: string, answers: string[]): InlineKeyboardMarkup {
  return { inline_keyboard: answers.map((text, choice) => [button(text.length > 60 ? `${text.slice(0, 59)}…` : text, { do: 'answer', requestId, choice })]) };
}

export function agentsKeyboard(agents: { agent_id: string; name: string }[], current: string | null): InlineKeyboardMarkup {
  return { inline_keyboard: agents.map((a) => [button(`${a.agent_id === current ? '✓ ' : ''}${a.name}`, { do: 'choose_agent', agentId: a.agent_id })]) };
}

export const NO_BUTTONS: InlineKeyboardMarkup = { inline_keyboard: [] };

/** What each answer type asks for, said in a force-reply question. */
export function typedAnswerHint(answerType: string): string {
  const hints: Record<string, string> = { number: 'a number', date: 'a date (YYYY-MM-DD)', email: 'an email address', text: 'your answer' };
  return `Reply to this message with ${hints[answerType] ?? 'your answer'}.`;
}
