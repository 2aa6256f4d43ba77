import type { AnswerVerdict } from './brain.ts';
import { EmailSchema } from '../domain/email.ts';

/**
 * What every brain shares about questions: the answer types a question may have, the
 * deterministic check of an answer against its type, and what the agent says on asking.
 */
const ANSWER_TYPES = ['text', 'number', 'date', 'email', 'yesno'];

export function isAnswerType(type: string): boolean {
  if (ANSWER_TYPES.includes(type)) return true;
  const choice = /^choice:(.+)$/.exec(type);
  return !!choice && choice[1]!.split('|').every((option) => option.trim() !== '');
}

export function unknownAnswerTypeReply(type: string): string {
  return `I can't ask a question of type "${type}". Use text, number, date, email, yesno or choice:a|b|c.`;
}

/** The reply when a question was put to someone who is not a member of the agent's workspace: nothing is asked. */
export function notAMemberReply(email: string): string {
  return `${email} is not a member of this agent's workspace, so no question was asked.`;
}

/** The reply naming an opened question: put to another member (`askedOf`), or to the sender. */
export function questionAskedReply(question: { requestId: string; text: string; answerType: string }, askedOf?: string): string {
  return askedOf
    ? `I asked ${askedOf}: ${question.text} (request_id ${question.requestId}).`
    : `Question for you: ${question.text} (request_id ${question.requestId}; answer type ${question.answerType}).`;
}

/** The deterministic judge: does the answer fit the question's type? */
export function judgeByType(answerType: string, rawAnswer: string): AnswerVerdict {
  const answer = rawAnswer.trim();
  if (answer === '') return { accepted: false, reason: 'The answer is empty; an answer is still missing.' };
  switch (answerType) {
    case 'text':
      return { accepted: true };
    case 'number':
      return /^[+-]?(\d+(\.\d+)?|\.\d+)([eE][+-]?\d+)?$/.test(answer) && Number.isFinite(Number(answer))
        ? { accepted: true } : { accepted: false, reason: 'A number is missing: answer with digits, e.g. 42 or 3.5.' };
    case 'date':
      return isCalendarDate(answer) ? { accepted: true } : { accepted: false, reason: 'A date is missing: answer as YYYY-MM-DD, e.g. 2026-12-31.' };
    case 'email':
      return EmailSchema.safeParse(answer).success
        ? { accepted: true } : { accepted: false, reason: 'An email address is missing, e.g. name@example.com.' };
    case 'yesno':
      return /^(yes|no|y|n)$/i.test(answer) ? { accepted: true } : { accepted: false, reason: 'A yes or no is missing: answer yes or no.' };
  }
  const choice = /^choice:(.+)$/.exec(answerType);
  if (choice) {
    const options = choice[1]!.split('|').map((o) => o.trim());
    return options.some((o) => o.toLowerCase() === answer.toLowerCase())
      ? { accepted: true } : { accepted: false, reason: `A choice is missing: answer one of ${options.join(', ')}.` };
  }
  return { accepted: false, reason: `The question's type "${answerType}" is unknown.` };
}

function isCalendarDate(value: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
  const date = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === value;
}
