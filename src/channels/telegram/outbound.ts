import type { Api } from 'grammy';
import type { FeedEvent, FeedEventData } from '../../domain/feed-events.ts';
import type { Services } from '../../services/services.ts';
import type { ChatEvent } from '../../services/telegram/relay.ts';
import { isPermanentRefusal } from './bot-api.ts';
import { actionKeyboard, buttonAnswers, NO_BUTTONS, questionKeyboard, splitMessage, typedAnswerHint } from './render.ts';
import type { Typing } from './typing.ts';

export interface OutboundDeps {
  services: Services;
  api: Api;
  typing: Typing;
}

/**
 * Delivers the event feed to the linked chats: each chat's events in position order, its cursor
 * moved past each once it is sent (or passed over: not of a Telegram session), so a crash sends
 * at most the one event under way again and loses none (the events and the cursors are in the
 * database). Returns how many events it went through.
 */
export async function deliverPending(deps: OutboundDeps, limit = 100): Promise<number> {
  const batch = await deps.services.telegramRelay.eventsToDeliver(limit);
  for (const item of batch) {
    try {
      if (item.forTheChat) await deliver(deps, item);
    } catch (error) {
      // A chat that refuses for good (the bot blocked, the chat gone) is passed over; anything
      // else (Telegram or the network down) ends the round: every chat's events are tried again
      // at the next one, in order.
      if (!isPermanentRefusal(error)) throw error;
    }
    await deps.services.telegramRelay.delivered(item.chatId, item.position);
  }
  return batch.length;
}

async function deliver(deps: OutboundDeps, { chatId, event }: ChatEvent): Promise<void> {
  const { api, typing, services } = deps;
  const chat = Number(chatId);
  switch (event.type) {
    case 'turn.completed': {
      typing.stop(event.session_id);
      for (const piece of splitMessage(data(event, 'turn.completed').text)) await api.sendMessage(chat, piece);
      return;
    }
    case 'turn.failed': {
      typing.stop(event.session_id);
      const { text } = data(event, 'turn.failed');
      for (const piece of splitMessage(`⚠️ The agent could not process your message: ${text}`)) await api.sendMessage(chat, piece);
      return;
    }
    case 'turn.cancelled':
      typing.stop(event.session_id);
      await api.sendMessage(chat, 'Cancelled.');
      return;
    case 'action.pending': {
      const { operation_id, kind, summary } = data(event, 'action.pending');
      const text = splitMessage(`🔐 Permission needed: ${kind}\n${summary}`)[0]!;
      const sent = await api.sendMessage(chat, text, { reply_markup: actionKeyboard(operation_id, kind) });
      await services.telegramRelay.recordMessage({ chat_id: chatId, message_id: sent.message_id, item_id: operation_id, purpose: 'action', open: 1, choices: null });
      return;
    }
    case 'question.opened': {
      const { request_id, text, answer_type } = data(event, 'question.opened');
      const answers = buttonAnswers(answer_type);
      const question = splitMessage(`❓ ${text}${answers ? '' : `\n${typedAnswerHint(answer_type)}`}`)[0]!;
      const sent = await api.sendMessage(chat, question, {
        reply_markup: answers ? questionKeyboard(request_id, answers) : { force_reply: true, input_field_placeholder: 'Your answer' },
      });
      await services.telegramRelay.recordMessage({
        chat_id: chatId, message_id: sent.message_id, item_id: request_id, purpose: 'question', open: 1, choices: answers ? JSON.stringify(answers) : null,
      });
      return;
    }
    case 'action.settled':
      return closeItem(deps, data(event, 'action.settled').operation_id);
    case 'question.answered':
      return closeItem(deps, data(event, 'question.answered').request_id);
    case 'question.closed':
      return closeItem(deps, data(event, 'question.closed').request_id);
  }
}

/**
 * An action or question settled (in the chat, the web app or through the API): its buttons are
 * removed and its prompts closed, so nothing settled can be pressed again.
 */
async function closeItem(deps: OutboundDeps, itemId: string): Promise<void> {
  const { telegramRelay } = deps.services;
  for (const shown of await telegramRelay.openMessagesOf(itemId)) {
    if (shown.purpose === 'reject_reason') continue; // a force-reply prompt has no buttons
    await deps.api.editMessageReplyMarkup(Number(shown.chat_id), shown.message_id, { reply_markup: NO_BUTTONS }).catch((error: unknown) => {
      if (!isPermanentRefusal(error)) throw error; // (a message already without buttons, or deleted: nothing to remove)
    });
  }
  await telegramRelay.closeMessagesOf(itemId);
}

const data = <T extends keyof FeedEventData>(event: FeedEvent, _type: T): FeedEventData[T] => event.data as FeedEventData[T];
