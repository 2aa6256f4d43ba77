import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local Bot API server speaking Telegram's HTTP protocol (https://core.telegram.org/bots/api):
 * `POST|GET /bot<token>/<method>` with JSON, form or query parameters, answered
 * `{ ok, result }` or `{ ok: false, error_code, description, parameters? }`. It keeps the chats'
 * messages, hands out updates the way Telegram does (getUpdates with `offset` confirming and
 * `timeout` holding the call; or, once setWebhook is called, POSTs them to the URL with the
 * secret-token header, retrying until a 2xx), records every call, and can answer 429 with
 * `retry_after`. Tests play the person: `send`, `reply`, `press`.
 */

export interface BotCall {
  method: string;
  params: Record<string, any>;
  at: number;
}

export interface FakeMessage {
  message_id: number;
  chat_id: number;
  text: string;
  reply_markup?: any;
  /** 'bot' for what the bot sent, 'user' for what the test sent as the person. */
  from: 'bot' | 'user';
}

const BOT_USER = { id: 700000001, is_bot: true, first_name: 'Agent Channel', username: 'agent_channel_test_bot' };

export class FakeBotApi {
  readonly token: string;
  readonly calls: BotCall[] = [];
  readonly messages: FakeMessage[] = [];
  url = '';
  /** The most getUpdates calls ever held at once (Telegram answers a second one 409). */
  maxConcurrentPolls = 0;
  private server: Server | null = null;
  private updates: any[] = [];
  private nextUpdateId = 1000;
  private nextMessageId = 1;
  private confirmed = 0;
  private polling = 0;
  private pollWaiters = new Set<() => void>();
  private failures: { method: string; count: number; retryAfter: number }[] = [];
  private webhook: { url: string; secret: string | undefined } | null = null;
  private pushing = false;
  private changeWaiters = new Set<() => void>();

  constructor(token = '123456789:AAFakeBotApiTokenForTests_0123456789') {
    this.token = token;
  }

  /** What TELEGRAM_API_ROOT is set to. */
  get apiRoot(): string {
    return this.url;
  }

  get botUsername(): string {
    return BOT_USER.username;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const wake of this.pollWaiters) wake();
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  /** The next `count` calls of `method` are answered 429 with `retry_after` seconds. */
  failNext(method: string, count: number, retryAfter: number): void {
    this.failures.push({ method, count, retryAfter });
  }

  // --- the person's side ---

  /** The person sends `text` in `chatId` (a reply to `replyTo` if given); returns the update. */
  send(chatId: number, text: string, replyTo?: number): any {
    const message_id = this.nextMessageId++;
    this.messages.push({ message_id, chat_id: chatId, text, from: 'user' });
    const reply = replyTo === undefined ? {} : { reply_to_message: { message_id: replyTo, chat: { id: chatId, type: 'private' }, date: now(), from: BOT_USER } };
    const entities = text.startsWith('/') ? { entities: [{ type: 'bot_command', offset: 0, length: text.split(/\s/)[0]!.length }] } : {};
    return this.push({ message: { message_id, date: now(), chat: { id: chatId, type: 'private', first_name: 'Ada' }, from: person(chatId), text, ...entities, ...reply } });
  }

  /** The person presses the inline button with `data` under the bot's message `messageId`. */
  press(chatId: number, messageId: number, data: string): any {
    const message = this.messages.find((m) => m.chat_id === chatId && m.message_id === messageId);
    return this.push({ callback_query: {
      id: `cbq${this.nextUpdateId}`, from: person(chatId), chat_instance: `ci${chatId}`, data,
      message: { message_id: messageId, date: now(), chat: { id: chatId, type: 'private' }, from: BOT_USER, text: message?.text ?? '' },
    } });
  }

  /** Puts an update (as built by the caller) in line again, e.g. Telegram delivering it twice. */
  redeliver(update: any): void {
    this.updates.push(update);
    this.updates.sort((a, b) => a.update_id - b.update_id);
    if (this.confirmed > update.update_id) this.confirmed = update.update_id;
    this.changed();
  }

  // --- what the bot did ---

  /** The bot's messages to `chatId`, oldest first. */
  botMessages(chatId: number): FakeMessage[] {
    return this.messages.filter((m) => m.chat_id === chatId && m.from === 'bot');
  }

  callsOf(method: string): BotCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** Waits (up to `timeoutMs`) until `check` gives something other than undefined/false, and returns it. */
  async waitFor<T>(check: () => T | undefined | false | null, timeoutMs = 30_000, what = 'the bot'): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = check();
      if (value !== undefined && value !== false && value !== null) return value;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; calls: ${JSON.stringify(this.calls.slice(-12).map((c) => [c.method, c.params.text ?? c.params.action ?? '']))}`);
      await new Promise<void>((resolve) => {
        const wake = () => { clearTimeout(timer); this.changeWaiters.delete(wake); resolve(); };
        const timer = setTimeout(wake, Math.min(left, 200));
        this.changeWaiters.add(wake);
      });
    }
  }

  /** Waits for the bot's next message to `chatId` after the first `after` of them, and returns it. */
  nextBotMessage(chatId: number, after: number, match: (m: FakeMessage) => boolean = () => true, timeoutMs?: number): Promise<FakeMessage> {
    return this.waitFor(() => this.botMessages(chatId).slice(after).find(match), timeoutMs, `a message to chat ${chatId} after #${after}`);
  }

  // --- the protocol ---

  private push(payload: Record<string, unknown>): any {
    const update = { update_id: this.nextUpdateId++, ...payload };
    this.updates.push(update);
    this.changed();
    void this.pushToWebhook();
    return update;
  }

  private changed(): void {
    for (const wake of this.pollWaiters) wake();
    for (const wake of this.changeWaiters) wake();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const match = /^\/bot([^/]+)\/([A-Za-z]+)/.exec(req.url ?? '');
    if (!match) return answer(res, 404, { ok: false, error_code: 404, description: 'Not Found' });
    if (match[1] !== this.token) return answer(res, 401, { ok: false, error_code: 401, description: 'Unauthorized' });
    const method = match[2]!;
    const params = await readParams(req);
    this.calls.push({ method, params, at: Date.now() });
    this.changed();
    const failure = this.failures.find((f) => f.method === method && f.count > 0);
    if (failure) {
      failure.count--;
      return answer(res, 429, { ok: false, error_code: 429, description: `Too Many Requests: retry after ${failure.retryAfter}`, parameters: { retry_after: failure.retryAfter } });
    }
    try {
      // A held call's client may go (a killed process): the call then stops counting as polling.
      const client = { gone: false };
      res.once('close', () => { client.gone = true; for (const wake of this.pollWaiters) wake(); });
      const result = await this.run(method, params, client);
      answer(res, 200, { ok: true, result });
    } catch (error) {
      const { code, description } = error as { code: number; description: string };
      answer(res, code ?? 500, { ok: false, error_code: code ?? 500, description: description ?? String(error) });
    }
  }

  private async run(method: string, p: Record<string, any>, client: { gone: boolean }): Promise<unknown> {
    switch (method) {
      case 'getMe': return BOT_USER;
      case 'getUpdates': return this.getUpdates(p, client);
      case 'setWebhook':
        this.webhook = { url: String(p.url), secret: p.secret_token };
        void this.pushToWebhook();
        return true;
      case 'deleteWebhook':
        this.webhook = null;
        if (p.drop_pending_updates) this.updates = [];
        return true;
      case 'sendMessage': {
        const text = String(p.text ?? '');
        if (text.length === 0) throw { code: 400, description: 'Bad Request: message text is empty' };
        if ([...text].length > 4096) throw { code: 400, description: 'Bad Request: message is too long' };
        const message: FakeMessage = { message_id: this.nextMessageId++, chat_id: Number(p.chat_id), text, from: 'bot', reply_markup: p.reply_markup };
        this.messages.push(message);
        return { message_id: message.message_id, date: now(), chat: { id: message.chat_id, type: 'private' }, from: BOT_USER, text, reply_markup: p.reply_markup };
      }
      case 'editMessageReplyMarkup':
      case 'editMessageText': {
        const message = this.messages.find((m) => m.chat_id === Number(p.chat_id) && m.message_id === Number(p.message_id) && m.from === 'bot');
        if (!message) throw { code: 400, description: 'Bad Request: message to edit not found' };
        if (method === 'editMessageText') message.text = String(p.text);
        message.reply_markup = p.reply_markup;
        return { message_id: message.message_id, date: now(), chat: { id: message.chat_id, type: 'private' }, text: message.text };
      }
      case 'answerCallbackQuery':
      case 'sendChatAction':
      case 'setMyCommands':
        return true;
      default:
        throw { code: 404, description: 'Not Found: method not found' };
    }
  }

  /** A held call counts as polling until it is answered or its client goes (a killed process's). */
  private async getUpdates(p: Record<string, any>, client: { gone: boolean }): Promise<unknown[]> {
    if (this.webhook) throw { code: 409, description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first" };
    const offset = Number(p.offset ?? 0);
    if (offset > this.confirmed) this.confirmed = offset;
    this.updates = this.updates.filter((u) => u.update_id >= this.confirmed);
    const limit = Math.min(Number(p.limit ?? 100), 100);
    const timeoutMs = Number(p.timeout ?? 0) * 1000;
    this.polling++;
    this.maxConcurrentPolls = Math.max(this.maxConcurrentPolls, this.polling);
    try {
      const deadline = Date.now() + timeoutMs;
      while (this.updates.length === 0 && Date.now() < deadline && this.server?.listening && !client.gone) {
        await new Promise<void>((resolve) => {
          const wake = () => { clearTimeout(timer); this.pollWaiters.delete(wake); resolve(); };
          const timer = setTimeout(wake, deadline - Date.now());
          this.pollWaiters.add(wake);
        });
      }
      return this.updates.slice(0, limit);
    } finally {
      this.polling--;
    }
  }

  /** Webhook mode: each update in order, POSTed until the server answers 2xx. */
  private async pushToWebhook(): Promise<void> {
    if (this.pushing) return;
    this.pushing = true;
    try {
      while (this.webhook && this.updates.length > 0 && this.server?.listening) {
        const update = this.updates[0];
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (this.webhook.secret) headers['x-telegram-bot-api-secret-token'] = this.webhook.secret;
        const ok = await fetch(this.webhook.url, { method: 'POST', headers, body: JSON.stringify(update) })
          .then((res) => res.ok, () => false);
        this.calls.push({ method: 'webhook-delivery', params: { update_id: update.update_id, ok }, at: Date.now() });
        this.changed();
        if (ok) this.updates.shift();
        else await new Promise((resolve) => setTimeout(resolve, 200));
      }
    } finally {
      this.pushing = false;
    }
  }
}

const now = (): number => Math.floor(Date.now() / 1000);
const person = (chatId: number) => ({ id: chatId, is_bot: false, first_name: 'Ada', username: `ada${chatId}` });

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A method's parameters, as Telegram takes them: query string, JSON, or a form (values that are JSON parsed). */
async function readParams(req: IncomingMessage): Promise<Record<string, any>> {
  const params: Record<string, any> = Object.fromEntries(new URL(req.url ?? '/', 'http://x').searchParams);
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks).toString('utf8');
  if (body === '') return params;
  const type = req.headers['content-type'] ?? '';
  if (type.includes('application/json')) return { ...params, ...JSON.parse(body) };
  for (const [name, value] of new URLSearchParams(body)) {
    try { params[name] = JSON.parse(value); } catch { params[name] = value; }
  }
  return params;
}
