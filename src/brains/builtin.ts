import type { AnswerVerdict, Brain, BrainContext, BrainInput, BrainResult, QuestionRef } from './brain.ts';
import { BrainFailure } from './brain.ts';
import { isAnswerType, judgeByType, notAMemberReply, questionAskedReply, unknownAnswerTypeReply } from './questions.ts';
import { actionDraftedReply, noToolReply, STOPPED_REPLY } from './tools.ts';

export const MAX_SLEEP_MS = 600_000;

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
        return { reply: input.reason ? `Re-planned: ${input.reason}` : STOPPED_REPLY };
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
      return { reply: actionDraftedReply(draft, tool.needsPermission), action: draft };
    }

    const askUser = /^!ask-user\s+(\S+)\s+(\S+)\s+([\s\S]+)$/.exec(trimmed);
    if (askUser) {
      const [, email, type, question] = askUser as unknown as [string, string, string, string];
      if (!isAnswerType(type)) return { reply: unknownAnswerTypeReply(type) };
      const member = await context.findWorkspaceMember(email);
      if (!member) return { reply: notAMemberReply(email) };
      const draft = { requestId: context.newRequestId(), text: question.trim(), answerType: type, askedOfUserId: member.userId };
      return { reply: questionAskedReply(draft, email), question: draft };
    }

    const ask = /^!ask\s+(\S+)\s+([\s\S]+)$/.exec(trimmed);
    if (ask) {
      const [, type, question] = ask as unknown as [string, string, string];
      if (!isAnswerType(type)) return { reply: unknownAnswerTypeReply(type) };
      const draft = { requestId: context.newRequestId(), text: question.trim(), answerType: type };
      return { reply: questionAskedReply(draft), question: draft };
    }

    return { reply: `You said: ${text}` };
  }

  async judgeAnswer(question: QuestionRef, answer: string): Promise<AnswerVerdict> {
    return judgeByType(question.answerType, answer);
  }
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
