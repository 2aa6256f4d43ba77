import type { Api } from 'grammy';
import type { CallbackQuery, Message, Update } from 'grammy/types';
import { Problem } from '../../domain/problems.ts';
import type { Services } from '../../services/services.ts';
import type { TelegramChat } from '../../services/telegram/relay.ts';
import { agentsKeyboard, parseCallbackData } from './render.ts';
import type { Typing } from './typing.ts';
import { channelIdempotencyKey } from '../../domain/idempotency-keys.ts';

const HELP_TEXT = [
  'Talk to your agent: every message you send here goes to it, and its replies, actions and questions come back here.',
  '',
  '/agents – list your agents and choose the one to talk to',
  '/new – start a new conversation with the chosen agent',
  '/unlink – unlink this chat from your account',
  '/help – this text',
].join('\n');

const NOT_LINKED = 'This chat is not linked to an agent-channel account, so nothing you send here reaches an agent. '
  + 'To link it, open the web app, go to Account → Channels → Telegram, and follow the link shown there (or send /start with the code).';
const BAD_CODE = 'That link code is not valid: it may have expired (codes last 10 minutes) or been used already. '
  + 'Get a new one in the web app under Account → Channels → Telegram.';

/** What handling an update needs: the services, the Bot API, and the typing indicator. */
export interface InboundDeps {
  services: Services;
  api: Api;
  typing: Typing;
}

/**
 * Handles one update from Telegram: commands, a message for the agent (submitted through the
 * one pipeline, channel `telegram`, its update_id as the Idempotency-Key so that handling it
 * again after a crash starts no second turn), a reply to a force-reply prompt, a button.
 * Replies, actions and questions come back through the event feed (outbound.ts), not here.
 */
export async function handleUpdate(deps: InboundDeps, update: Update): Promise<void> {
  if (update.callback_query) return handleButton(deps, update.callback_query);
  const message = update.message;
  if (!message || message.text === undefined) return;
  const chatId = String(message.chat.id);
  const say = (text: string, extra: Parameters<Api['sendMessage']>[2] = {}) => deps.api.sendMessage(message.chat.id, text, extra);
  const [command, ...words] = message.text.trim().split(/\s+/);
  const name = command?.startsWith('/') ? command.slice(1).split('@')[0]!.toLowerCase() : null;
  const { telegramLinks, telegramRelay } = deps.services;

  if (name === 'start' && words[0]) {
    const userId = await telegramLinks.redeem(chatId, words[0]);
    if (userId === null) return void await say(BAD_CODE);
    const agents = await deps.services.agents.listForUser(userId);
    if (agents.length === 1) await telegramRelay.setTarget(chatId, agents[0]!.agent_id, null);
    const next = agents.length === 1 ? `Send a message to talk to ${agents[0]!.name}.`
      : agents.length === 0 ? 'You have no agents yet: create one in the web app, then send a message here.'
        : 'Choose the agent to talk to with /agents.';
    return void await say(`Linked to your account. ${next}\n\n${HELP_TEXT}`);
  }
  const chat = await telegramRelay.chat(chatId);
  if (!chat) return void await say(NOT_LINKED);
  switch (name) {
    case 'start': case 'help': return void await say(HELP_TEXT);
    case 'unlink':
      await telegramLinks.unlinkChat(chatId);
      return void await say('Unlinked: this chat no longer reaches your account. Link it again from the web app whenever you like.');
    case 'agents': return listAgents(deps, chat, await agentsOf(deps, chat));
    case 'new': {
      const agents = await agentsOf(deps, chat);
      const agent = chosenAgent(agents, chat);
      if (!agent) return listAgents(deps, chat, agents);
      await telegramRelay.setTarget(chatId, agent.agent_id, null);
      return void await say(`New conversation with ${agent.name}. Send your first message.`);
    }
    case 'skip': break; // a reply to a prompt, below
    default:
      if (name !== null) return void await say(`Unknown command /${name}.\n\n${HELP_TEXT}`);
  }
  const prompt = message.reply_to_message ? await telegramRelay.message(chatId, message.reply_to_message.message_id) : null;
  if (prompt?.open) return answerPrompt(deps, chat, prompt.purpose, prompt.item_id, name === 'skip' ? null : message.text);
  if (name === 'skip') return void await say('Nothing to skip.');
  return submit(deps, chat, message, update.update_id);
}

async function submit(deps: InboundDeps, chat: TelegramChat, message: Message, updateId: number): Promise<void> {
  const { conversations, telegramRelay } = deps.services;
  let agentId = chat.agent_id;
  if (chat.session_id === null && agentId === null) {
    const agents = await agentsOf(deps, chat);
    const agent = chosenAgent(agents, chat);
    if (!agent) return listAgents(deps, chat, agents);
    agentId = agent.agent_id;
  }
  try {
    const result = await conversations.submit({
      userId: chat.user_id, channel: 'telegram', text: message.text,
      ...(chat.session_id ? { sessionId: chat.session_id } : { agentId: agentId! }),
      idempotencyKey: channelIdempotencyKey('telegram', String(updateId)), waitMs: 0,
    });
    await telegramRelay.setTarget(chat.chat_id, result.agent_id, result.session_id);
    if (result.status !== 'completed') deps.typing.start(chat.chat_id, result.session_id);
  } catch (error) {
    // Not a refusal: the same update's first handling is still being accepted (its process died
    // mid-way); left in the inbox and handled again shortly.
    if (!(error instanceof Problem) || error.code === 'idempotency_key_in_use') throw error;
    if (error.code === 'session_not_found' || error.code === 'agent_not_found') {
      // The session or agent is gone (deleted, or the membership ended): start again.
      await telegramRelay.setTarget(chat.chat_id, null, null);
      return void await deps.api.sendMessage(Number(chat.chat_id), 'That conversation is no longer available. Send your message again to start a new one, or choose an agent with /agents.');
    }
    await deps.api.sendMessage(Number(chat.chat_id), `Not sent: ${error.message}`);
  }
}

/** The chat's agent: the one chosen, else the person's only one; null when there are several or none. */
type Agents = Awaited<ReturnType<InboundDeps['services']['agents']['listForUser']>>;

const agentsOf = (deps: InboundDeps, chat: TelegramChat): Promise<Agents> => deps.services.agents.listForUser(chat.user_id);

/** The chat's chosen agent, or the person's only one; null: the person must choose. */
function chosenAgent(agents: Agents, chat: TelegramChat): Agents[number] | null {
  return agents.find((a) => a.agent_id === chat.agent_id) ?? (agents.length === 1 ? agents[0]! : null);
}

async function listAgents(deps: InboundDeps, chat: TelegramChat, agents: Agents): Promise<void> {
  if (agents.length === 0) return void await deps.api.sendMessage(Number(chat.chat_id), 'You have no agents yet: create one in the web app first.');
  const current = chosenAgent(agents, chat)?.agent_id ?? null;
  await deps.api.sendMessage(Number(chat.chat_id), agents.length === 1 ? `Your agent: ${agents[0]!.name}.` : 'Choose the agent to talk to:', {
    reply_markup: agentsKeyboard(agents.slice(0, 50), current),
  });
}

/** A reply to one of the bot's prompts: an answer to a question, or the reason for a rejection (null: none). */
async function answerPrompt(deps: InboundDeps, chat: TelegramChat, purpose: string, itemId: string, text: string | null): Promise<void> {
  const { missions } = deps.services;
  const say = (reply: string) => deps.api.sendMessage(Number(chat.chat_id), reply);
  if (purpose === 'reject_reason') {
    const [result] = (await missions.decide(chat.user_id, [{ operation_id: itemId, decision: 'reject', ...(text ? { reason: text } : {}) }])).results;
    if (result && !result.ok) await say(settledText(result.error.code));
    return;
  }
  if (purpose === 'question' && text !== null) return answerQuestion(deps, chat, itemId, text);
  await say('A question needs an answer: reply to it with one.');
}

async function answerQuestion(deps: InboundDeps, chat: TelegramChat, requestId: string, text: string): Promise<void> {
  const [result] = (await deps.services.missions.answer(chat.user_id, [{ request_id: requestId, text }])).results;
  if (!result) return;
  if (!result.ok) await deps.api.sendMessage(Number(chat.chat_id), settledText(result.error.code));
  else if (!result.accepted) await deps.api.sendMessage(Number(chat.chat_id), `Not accepted: ${result.reason}\nReply to the question again with another answer.`);
}

const settledText = (code: string): string => (code === 'already_settled' ? 'That action was already settled.'
  : code === 'already_answered' ? 'That question was already answered.' : 'That is no longer waiting for you.');

/** A button pressed: answered at once (Telegram shows a spinner until then), then acted on. */
async function handleButton(deps: InboundDeps, query: CallbackQuery): Promise<void> {
  const { telegramRelay, missions } = deps.services;
  const message = query.message;
  const intent = query.data ? parseCallbackData(query.data) : null;
  const chat = message ? await telegramRelay.chat(String(message.chat.id)) : null;
  await deps.api.answerCallbackQuery(query.id, chat ? {} : { text: 'This chat is not linked to an account.' }).catch(() => {});
  if (!chat || !message || !intent) return;
  const say = (text: string, extra: Parameters<Api['sendMessage']>[2] = {}) => deps.api.sendMessage(Number(chat.chat_id), text, extra);
  switch (intent.do) {
    case 'choose_agent': {
      const agent = (await deps.services.agents.listForUser(chat.user_id)).find((a) => a.agent_id === intent.agentId);
      if (!agent) return void await say('That agent is not available to you.');
      await telegramRelay.setTarget(chat.chat_id, agent.agent_id, null);
      return void await say(`Now talking to ${agent.name}: your next message starts a new conversation.`);
    }
    case 'answer': {
      const shown = await telegramRelay.message(chat.chat_id, message.message_id);
      const choices = shown?.choices ? JSON.parse(shown.choices) as string[] : [];
      const text = shown?.item_id === intent.requestId ? choices[intent.choice] : undefined;
      if (text === undefined) return void await say('That question is no longer waiting for you.');
      return answerQuestion(deps, chat, intent.requestId, text);
    }
    case 'reject': {
      const prompt = await say('Why reject it? Reply to this message with a reason, and the agent re-plans around it; or reply /skip to reject without one (the mission stops).', {
        reply_markup: { force_reply: true, input_field_placeholder: 'A reason (optional)' },
      });
      await telegramRelay.recordMessage({ chat_id: chat.chat_id, message_id: prompt.message_id, item_id: intent.operationId, purpose: 'reject_reason', open: 1, choices: null });
      return;
    }
    default: {
      const [result] = (await missions.decide(chat.user_id, [{ operation_id: intent.operationId, decision: intent.do }])).results;
      if (result && !result.ok) await say(settledText(result.error.code));
    }
  }
}
