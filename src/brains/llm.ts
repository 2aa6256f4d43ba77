import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, tool, type JSONValue, type LanguageModel, type ModelMessage, type ToolSet } from 'ai';
import { z } from 'zod';
import type { ActionRef, AnswerVerdict, Brain, BrainContext, BrainInput, BrainResult, HistoryTurn, QuestionRef } from './brain.ts';
import { BrainFailure } from './brain.ts';
import { DEFAULT_HISTORY_CHARACTERS, type ModelSettings } from './model-settings.ts';
import { ANTHROPIC_BASE_URL } from './model-probe.ts';
import { isAnswerType, judgeByType, notAMemberReply, questionAskedReply } from './questions.ts';
import { actionDraftedReply, noToolReply, STOPPED_REPLY, type ToolRegistry } from './tools.ts';
import { isLongerThan, isUnstorableText, REASON_MAX_LENGTH, TEXT_MAX_LENGTH } from '../domain/problems.ts';

/** One warning about a model call that failed: what went wrong, never the provider's text or the key. */
export type ModelWarning = (fields: Record<string, unknown>, message: string) => void;

export const DEFAULT_SYSTEM_PROMPT = [
  'You are an agent that people reach through a messaging channel. Answer plainly and briefly.',
  'When what you are asked to do needs an action with an effect outside this conversation (sending, booking, buying, changing or deleting something),',
  'call request_action: a person approves or rejects it before it runs, and you are told which.',
  'When you need something only a person can tell you, call ask_user with the answer_type that fits the answer you need.',
  'Call at most one of these tools in an answer, and say in your text what you are doing.',
].join(' ');

/** How a model call failed, as the warning's `failure` names it. */
export type ModelFailure = 'network_error' | 'timeout' | 'http_error' | 'no_usable_answer';

/**
 * The turn's failure text (and the 502's detail) for a failed model call: the kind of failure
 * the warning names, and the provider's HTTP status, never the provider's own words.
 */
export function modelFailedText(failure: ModelFailure, statusCode: number | null = null): string {
  const why = failure === 'network_error' ? 'its model could not be reached'
    : failure === 'timeout' ? 'its model did not answer in time'
    : failure === 'http_error' ? `its model refused the request${statusCode === null ? '' : ` (HTTP ${statusCode})`}`
    : 'its model gave no usable answer';
  return `The agent could not process this message: ${why}.`;
}

/** A kind is a word naming a tool; a longer one is cut (the other texts are cut to the API's own limits). */
const MAX_KIND_LENGTH = 200;
/** The longest answer_type kept (a choice list); a longer one becomes text. */
const MAX_ANSWER_TYPE_LENGTH = 1000;
/** The longest email address (RFC 5321's path); a longer one names nobody. */
const MAX_EMAIL_LENGTH = 254;

// Tools have no `execute`: a call ends the model's step, and the turn worker turns it into a
// pending action or an open question. Their inputs are checked here, not by the SDK, so that a
// call a little off (a missing details object) is still usable.
const requestActionInput = z.object({
  kind: z.string().describe('What sort of action, one word, e.g. "email" or "refund".'),
  summary: z.string().describe('One sentence the person approves or rejects.'),
  details: z.record(z.string(), z.unknown()).optional().describe('Everything the action needs to run (recipients, amounts, ...).'),
});
const askUserInput = z.object({
  question: z.string().describe('The question, as the person will read it.'),
  answer_type: z.string().optional()
    .describe('The kind of answer: text, number, date (YYYY-MM-DD), email, yesno, or choice:a|b|c with the options. Default text.'),
  email: z.string().optional().describe('Ask another member of the workspace, by email, instead of the person you are talking to.'),
});
const judgeAnswerInput = z.object({
  accepted: z.boolean().describe('Does the answer give what the question asked for?'),
  reason: z.string().optional().describe('When not accepted: what is still missing, in one sentence addressed to the person.'),
});

/**
 * The model-backed brain: the session's history and the unit of work go to the model through
 * the AI SDK (one non-streaming call). Its text is the reply; a request_action call becomes an
 * action (waiting for a decision unless its tool needs no permission), an ask_user call an open
 * question. A turn holds at most one of them (BrainResult does): the first such call is taken,
 * later ones are ignored. A text answer to a question is judged by a model call; typed ones by
 * the shared deterministic check.
 */
export class LlmBrain implements Brain {
  private readonly settings: ModelSettings;
  private readonly model: LanguageModel;
  private readonly registry: ToolRegistry;
  private readonly warn: ModelWarning;

  constructor(settings: ModelSettings, registry: ToolRegistry, warn: ModelWarning) {
    this.settings = settings;
    this.registry = registry;
    this.warn = warn;
    this.model = languageModel(settings);
    routeSdkWarnings(warn);
  }

  async respond(input: BrainInput, context: BrainContext): Promise<BrainResult> {
    switch (input.kind) {
      case 'message':
        return this.converse(context, { role: 'user', content: input.text });
      case 'action_approved': {
        await context.runTool(input.action);
        const outcome = { outcome: 'approved', carried_out: true, next: 'Tell the person it is done.' };
        try {
          return { ...(await this.converse(context, actionOutcome(input.action, outcome))), executed: true };
        } catch (error) {
          // The action ran: a model that cannot word the reply must not make it look failed, nor
          // a shutdown while it does make it run again at the next start (the lease is still held).
          if (!context.signal.aborted && !(error instanceof BrainFailure)) throw error;
          return { reply: `Done: ${input.action.summary}`, executed: true };
        }
      }
      case 'action_rejected':
        // Without a reason the mission stops (contract §8), as with the built-in agent: nothing to ask the model.
        if (!input.reason) return { reply: STOPPED_REPLY };
        return this.converse(context, actionOutcome(input.action, {
          outcome: 'rejected', reason: input.reason, next: 'Re-plan: request a different action, ask a question, or answer.',
        }));
      case 'question_answered':
        return this.converse(context, toolOutcome(input.question.requestId, 'ask_user',
          { question: input.question.text, answer_type: input.question.answerType },
          { answer: input.answer.trim(), next: 'Continue with the answer.' }));
    }
  }

  async judgeAnswer(question: QuestionRef, answer: string, signal?: AbortSignal): Promise<AnswerVerdict> {
    const byType = judgeByType(question.answerType, answer);
    if (question.answerType !== 'text' || !byType.accepted) return byType;
    const tools = { judge_answer: tool({ description: 'Give your verdict on the answer.', inputSchema: judgeAnswerInput }) };
    try {
      const result = await this.call({
        instructions: 'You judge whether an answer gives what a question asked for. Call judge_answer; when it does not, the reason names what is missing.',
        messages: [{ role: 'user', content: `Question: ${question.text}\n\nAnswer: ${answer}` }],
        tools,
        toolChoice: { type: 'tool', toolName: 'judge_answer' },
      }, signal ?? null, { requestId: question.requestId });
      const verdict = judgeAnswerInput.safeParse(result.toolCalls.find((call) => call.toolName === 'judge_answer' && !call.invalid)?.input);
      if (!verdict.success) throw this.unusable({ requestId: question.requestId }, 'no judge_answer call');
      if (verdict.data.accepted) return { accepted: true };
      const reason = storable(verdict.data.reason?.trim() ?? '');
      return { accepted: false, reason: cut(reason === '' ? 'The answer does not give what the question asked for.' : reason, REASON_MAX_LENGTH) };
    } catch (error) {
      if (!(error instanceof BrainFailure) && !signal?.aborted) throw error;
      // Refused rather than let through (a shutdown too): the person sends the answer again.
      return { accepted: false, reason: 'The answer could not be judged just now; an answer judged by the agent is still missing: send it again.' };
    }
  }

  /**
   * One model call over the conversation so far and the unit of work (a message, or a
   * continuation's outcome); its answer becomes the turn's result.
   */
  private async converse(context: BrainContext, unitOfWork: UnitOfWork): Promise<BrainResult> {
    const result = await this.call({
      instructions: this.settings.systemPrompt ?? DEFAULT_SYSTEM_PROMPT,
      messages: conversation(await context.history(), unitOfWork, this.settings.historyCharacters ?? DEFAULT_HISTORY_CHARACTERS),
      tools: {
        request_action: tool({ description: this.requestActionDescription(), inputSchema: requestActionInput }),
        ask_user: tool({ description: 'Ask a person a question; the task waits for an accepted answer.', inputSchema: askUserInput }),
      },
    }, context.signal, jobIds(context));
    const text = cut(storable(result.text.trim()), TEXT_MAX_LENGTH);
    // One action or question per turn: the first usable call; the rest are ignored.
    for (const call of result.toolCalls) {
      if (call.invalid) continue;
      if (call.toolName === 'request_action') {
        const parsed = requestActionInput.safeParse(call.input);
        if (parsed.success) return this.draftAction(parsed.data, text, context);
      } else if (call.toolName === 'ask_user') {
        const parsed = askUserInput.safeParse(call.input);
        if (parsed.success) return this.draftQuestion(parsed.data, text, context);
      }
    }
    if (text === '') throw this.unusable(jobIds(context), 'no text and no usable tool call');
    return { reply: text };
  }

  private draftAction(call: z.infer<typeof requestActionInput>, text: string, context: BrainContext): BrainResult {
    const kind = cut(storable(call.kind.trim()), MAX_KIND_LENGTH);
    const tool = kind === '' ? null : context.toolFor(kind);
    if (!tool) return { reply: noToolReply(kind) };
    const summary = cut(storable(call.summary.trim()), TEXT_MAX_LENGTH);
    // Details are shown to whoever decides: cut short they would be approved unseen, so they are refused instead.
    if (isLongerThan(JSON.stringify(call.details ?? {}), TEXT_MAX_LENGTH)) {
      return { reply: `I can't draft that "${kind}" action: its details are longer than ${TEXT_MAX_LENGTH} characters, so nothing was drafted.` };
    }
    const details = storableJson(call.details ?? {}) as Record<string, unknown>;
    const draft = { operationId: context.newOperationId(), kind, summary: summary === '' ? kind : summary, details };
    return { reply: text || actionDraftedReply(draft, tool.needsPermission), action: draft };
  }

  private async draftQuestion(call: z.infer<typeof askUserInput>, text: string, context: BrainContext): Promise<BrainResult> {
    // A type no database stores as it is, or longer than any list of choices needs, is no type either.
    const type = call.answer_type?.trim() ?? '';
    const answerType = isAnswerType(type) && !isUnstorableText(type) && !isLongerThan(type, MAX_ANSWER_TYPE_LENGTH) ? type : 'text';
    const questionText = cut(storable(call.question.trim()), TEXT_MAX_LENGTH);
    if (questionText === '') throw this.unusable(jobIds(context), 'an empty question');
    // Storable and of an address's length before it is looked up (PostgreSQL refuses a NUL in a query's text).
    const email = cut(storable(call.email?.trim() ?? ''), MAX_EMAIL_LENGTH) || null;
    let askedOfUserId: string | undefined;
    if (email) {
      const member = await context.findWorkspaceMember(email);
      if (!member) return { reply: notAMemberReply(email) };
      askedOfUserId = member.userId;
    }
    const draft = { requestId: context.newRequestId(), text: questionText, answerType, ...(askedOfUserId ? { askedOfUserId } : {}) };
    return { reply: text || questionAskedReply(draft, email ?? undefined), question: draft };
  }

  /** The deployment's own tools are named to the model; the built-in registry takes any kind. */
  private requestActionDescription(): string {
    const registered = this.registry.list();
    const base = 'Request an action with an effect outside this conversation. Unless its kind needs no permission, a person approves or rejects it first; your turn ends here.';
    if (registered.length === 0) return `${base} Any kind may be requested.`;
    return `${base} Kinds that can run: ${registered.map((t) => `"${t.kind}" (${t.description}${t.needsPermission ? '' : '; runs without asking'})`).join('; ')}.`;
  }

  /**
   * A generateText call bounded by MODEL_TIMEOUT_MS and by `stop` (a turn's signal, or the engine's
   * for a judge: a shutdown).
   * The SDK does not retry (maxRetries 0): a retry would hold the agent's line (one turn at a
   * time per agent) for its back-off, and a failed turn is already visible to the client (502
   * agent_failed) which can send again. Any failure but a shutdown becomes a BrainFailure with a
   * generic message, after one warning without the provider's text or the key.
   */
  private async call(
    request: Pick<Parameters<typeof generateText<ToolSet>>[0], 'instructions' | 'tools' | 'toolChoice'> & { messages: ModelMessage[] },
    stop: AbortSignal | null,
    ids: Record<string, unknown>,
  ) {
    const timeout = AbortSignal.timeout(this.settings.timeoutMs);
    const signal = stop ? AbortSignal.any([stop, timeout]) : timeout;
    try {
      return await generateText({
        model: this.model, maxRetries: 0, abortSignal: signal,
        ...(this.settings.maxOutputTokens ? { maxOutputTokens: this.settings.maxOutputTokens } : {}), ...request,
      });
    } catch (error) {
      if (stop?.aborted) throw error; // a shutdown: the engine puts a turn back in line; a judge refuses the answer
      const statusCode = APICallError.isInstance(error) ? (error.statusCode ?? null) : null;
      // A 200 whose body is no answer (not JSON, not the protocol's shape) is an unusable answer, not an HTTP error.
      const failure: ModelFailure = timeout.aborted ? 'timeout'
        : statusCode !== null && statusCode >= 400 ? 'http_error'
        : APICallError.isInstance(error) && statusCode === null ? 'network_error' // no HTTP answer at all
        : 'no_usable_answer';
      this.warn({
        ...ids, provider: this.settings.provider, model: this.settings.name, failure, statusCode,
        errorName: error instanceof Error ? error.name : typeof error,
      }, 'the model call failed');
      throw new BrainFailure(modelFailedText(failure, failure === 'http_error' ? statusCode : null));
    }
  }

  /** A model answer that holds nothing usable: warned about like a failed call. */
  private unusable(ids: Record<string, unknown>, what: string): BrainFailure {
    this.warn({ ...ids, provider: this.settings.provider, model: this.settings.name, failure: 'no_usable_answer', statusCode: 200, what }, 'the model call failed');
    return new BrainFailure(modelFailedText('no_usable_answer'));
  }
}

/** How many distinct SDK warnings are remembered as told (then the memory starts over). */
const MAX_WARNINGS_REMEMBERED = 100;

/**
 * The SDK's own warnings (a setting used in a compatibility mode, say) go to the server's log,
 * each once, rather than to stderr as process warnings outside the JSON log. (A global of the SDK.)
 */
function routeSdkWarnings(warn: ModelWarning): void {
  const told = new Set<string>();
  (globalThis as { AI_SDK_LOG_WARNINGS?: unknown }).AI_SDK_LOG_WARNINGS = (options: { warnings: unknown[]; provider?: string; model?: string }) => {
    for (const warning of options.warnings) {
      const text = JSON.stringify(warning);
      if (told.has(text)) continue;
      if (told.size >= MAX_WARNINGS_REMEMBERED) told.clear();
      told.add(text);
      warn({ provider: options.provider, model: options.model, warning }, 'the AI SDK warned about a model call');
    }
  };
}

function languageModel(settings: ModelSettings): LanguageModel {
  // The key is passed even when empty: the SDKs would otherwise read their own environment
  // variables (OPENAI_API_KEY, ANTHROPIC_API_KEY), a setting nobody made here.
  if (settings.provider === 'anthropic') {
    return createAnthropic({ baseURL: settings.baseUrl ?? ANTHROPIC_BASE_URL, apiKey: settings.apiKey ?? '' })(settings.name);
  }
  return createOpenAICompatible({ name: 'model', baseURL: settings.baseUrl!, ...(settings.apiKey ? { apiKey: settings.apiKey } : {}) })
    .chatModel(settings.name);
}

/** What a model call is about: the person's message, or a continuation's tool call and its outcome. */
type UnitOfWork = ModelMessage | [ModelMessage, ModelMessage];

/**
 * A continuation as the model's own tool call (its id the action's or question's) and the
 * tool's result: the outcome reaches the model as data from the tool, never as words in the
 * person's voice, which a person's message (or an answer's text) could imitate.
 */
function toolOutcome(callId: string, toolName: 'request_action' | 'ask_user', input: Record<string, unknown>, output: Record<string, JSONValue>): UnitOfWork {
  return [
    { role: 'assistant', content: [{ type: 'tool-call', toolCallId: callId, toolName, input }] },
    { role: 'tool', content: [{ type: 'tool-result', toolCallId: callId, toolName, output: { type: 'json', value: output } }] },
  ];
}

function actionOutcome(action: ActionRef, output: Record<string, JSONValue>): UnitOfWork {
  return toolOutcome(action.operationId, 'request_action', { kind: action.kind, summary: action.summary, details: action.details }, output);
}

/** Said first when a continuation's history holds no turn of the person's (providers want the person to speak first). */
export const HISTORY_LEFT_OUT = '(The earlier messages of this conversation are left out.)';

/**
 * The session's turns as the model's messages, then the unit of work. A message's own turn is
 * taken out of the history and put last: replies to earlier messages may have been written
 * after it while it waited.
 */
function conversation(history: HistoryTurn[], unitOfWork: UnitOfWork, historyCharacters: number): ModelMessage[] {
  const latest = Array.isArray(unitOfWork) ? unitOfWork : [unitOfWork];
  const ownText = Array.isArray(unitOfWork) ? null : unitOfWork.content;
  const own = history.findLastIndex((turn) => turn.role === 'user' && turn.text === ownText);
  const earlier = own === -1 ? history : history.toSpliced(own, 1);
  // The latest turns that fit in historyCharacters, a turn whole or not at all.
  let first = earlier.length;
  for (let characters = 0; first > 0 && characters + earlier[first - 1]!.text.length <= historyCharacters; first--) {
    characters += earlier[first - 1]!.text.length;
  }
  const messages: ModelMessage[] = earlier.slice(first).map((turn) => ({ role: turn.role === 'user' ? 'user' : 'assistant', content: turn.text }));
  // A bounded history may begin with the agent's turn; providers want the person to speak first.
  while (messages[0]?.role === 'assistant') messages.shift();
  if (messages.length === 0 && latest[0]!.role !== 'user') messages.push({ role: 'user', content: HISTORY_LEFT_OUT });
  return [...messages, ...latest];
}

/** What a warning names of the job a failed call was for. */
function jobIds(context: BrainContext): Record<string, unknown> {
  return { jobId: context.jobId, agentId: context.agentId, sessionId: context.sessionId };
}

/** Text every database stores as it is (see isUnstorableText): NUL and lone surrogates become U+FFFD. */
function storable(text: string): string {
  return isUnstorableText(text) ? text.replaceAll('\u0000', '\uFFFD').toWellFormed() : text;
}

/**
 * A JSON value with every string in it, keys included, made storable: JSON.stringify would store
 * a NUL or a lone surrogate as an escape, but the API would hand it back as it is (GET /actions).
 */
function storableJson(value: unknown): unknown {
  if (typeof value === 'string') return storable(value);
  if (Array.isArray(value)) return value.map(storableJson);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, v]) => [storable(key), storableJson(v)]));
  return value;
}

/** `text` cut to `max` characters (code points, as every limit counts), the last one an ellipsis. */
function cut(text: string, max: number): string {
  return isLongerThan(text, max) ? `${[...text].slice(0, max - 1).join('')}…` : text;
}
