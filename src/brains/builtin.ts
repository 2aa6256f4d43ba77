import type { AnswerVerdict, Brain, BrainContext, BrainInput, BrainResult, QuestionRef } from './brain.ts';
import { BrainFailure } from './brain.ts';
import { noToolReply } from './tools.ts';
import { EmailSchema } from '../domain/email.ts';

export const MAX_SLEEP_MS = 600_000;
const ANSWER_TYPES = ['text', 'number', 'date', 'email', 'yesno'];

/**
 * The built-in agent (contract §8): deterministic and offline. Plain text is echoed; directives
 * at the start of a message sleep, fail, draft an action or ask a question.
 */
export class BuiltinBrain implements Brain {
  async respond(input: BrainInput, context: BrainContext): Promise<BrainResult> {
    switch (input.kind) {
      case 'message':
        return this.message(input.text, context);
      case 'action_approved':
        await context.runTool(input.action);
        return { reply: `Done: ${input.action.summary}`, executed: true };
      case 'action_rejected':
        return { reply: input.reason ? `Re-planned: ${input.reason}` : 'Stopped.' };
      case 'question_answered':
        return { reply: `Noted: ${input.answer.trim()}` };
    }
  }

  private async message(text: string, context: BrainContext): Promise<BrainResult> {
    // Directives are read from the text without surrounding whitespace, so "!action email   "
    // names no summary (plain text, as "!action email" is) rather than an empty one.
    const trimmed = text.trim();

    const sleep = /^!sleep\s+(\d+)(?:\s+([\s\S]*))?$/.exec(trimmed);
    if (sleep) {
      const ms = Math.min(Number(sleep[1]), MAX_SLEEP_MS);
      await pause(ms, context.signal);
      const rest = sleep[2]?.trim();
      return rest ? this.message(rest, context) : { reply: `Slept ${ms} ms.` };
    }

    if (/^!fail(\s|$)/.test(trimmed)) throw new BrainFailure('The built-in agent was told to fail (!fail).');

    const action = /^!action\s+(\S+)\s+([\s\S]+)$/.exec(trimmed);
    if (action) {
      const [, kind, rawSummary] = action as unknown as [string, string, string];
      const tool = context.toolFor(kind);
      if (!tool) return { reply: noToolReply(kind) };
      const operationId = context.newOperationId();
      const summary = rawSummary.trim();
      const draft = { operationId, kind, summary, details: { kind, summary } };
      // The built-in registry puts every kind behind permission (§8); another registry may not.
      return tool.needsPermission
        ? { reply: `I need your permission to run "${kind}": ${summary} (operation_id ${operationId}). Approve or reject it.`, action: draft }
        : { reply: `Running "${kind}": ${summary} (operation_id ${operationId}); it needs no permission.`, action: draft };
    }

    const askUser = /^!ask-user\s+(\S+)\s+(\S+)\s+([\s\S]+)$/.exec(trimmed);
    if (askUser) {
      const [, email, type, question] = askUser as unknown as [string, string, string, string];
      if (!isAnswerType(type)) return { reply: unknownType(type) };
      const member = await context.findWorkspaceMember(email);
      if (!member) return { reply: `${email} is not a member of this agent's workspace, so no question was asked.` };
      const requestId = context.newRequestId();
      return {
        reply: `I asked ${email}: ${question.trim()} (request_id ${requestId}).`,
        question: { requestId, text: question.trim(), answerType: type, askedOfUserId: member.userId },
      };
    }

    const ask = /^!ask\s+(\S+)\s+([\s\S]+)$/.exec(trimmed);
    if (ask) {
      const [, type, question] = ask as unknown as [string, string, string];
      if (!isAnswerType(type)) return { reply: unknownType(type) };
      const requestId = context.newRequestId();
      return {
        reply: `Question for you: ${question.trim()} (request_id ${requestId}; answer type ${type}).`,
        question: { requestId, text: question.trim(), answerType: type },
      };
    }

    return { reply: `You said: ${text}` };
  }

  async judgeAnswer(question: QuestionRef, answer: string): Promise<AnswerVerdict> {
    return judgeByType(question.answerType, answer);
  }
}

export function isAnswerType(type: string): boolean {
  if (ANSWER_TYPES.includes(type)) return true;
  const choice = /^choice:(.+)$/.exec(type);
  return !!choice && choice[1]!.split('|').every((option) => option.trim() !== '');
}

function unknownType(type: string): string {
  return `I can't ask a question of type "${type}". Use text, number, date, email, yesno or choice:a|b|c.`;
}

/** The built-in judge: does the answer fit the question's type? */
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

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
