import type { Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { Services } from '../../services/services.ts';
import { describeBotError, isPermanentRefusal, sleep } from './bot-api.ts';
import { handleUpdate } from './inbound.ts';
import { deliverPending } from './outbound.ts';
import type { TelegramSettings } from './settings.ts';
import { Typing } from './typing.ts';

export type ChannelLog = (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;

/** How long a loop pauses after a failure (Telegram or the database away) before trying again. */
const RETRY_MS = 1_000;
/** The inbox is looked at this often as well as when woken (updates another instance's webhook took). */
const INBOX_LOOK_MS = 1_000;
/** The event feed is read this often as well as when woken. */
const EVENTS_LOOK_MS = 2_000;
/** How many times an update is tried before it is passed over (so that one that cannot be handled holds up no other). */
const MAX_ATTEMPTS = 5;
const ALLOWED_UPDATES = ['message', 'callback_query'] as const;

export interface LeaderDeps {
  settings: TelegramSettings;
  services: Services;
  api: Api;
  log: ChannelLog;
  /** The secret Telegram sends with webhook calls (webhook mode). */
  webhookSecret: string;
}

/**
 * What the one instance holding the lease does: receives updates (getUpdates, or registers the
 * webhook), handles the inbox of updates in update_id order, and delivers the event feed to the
 * chats. Stopped when the lease is lost or the server stops.
 */
export class Leader {
  private readonly deps: LeaderDeps;
  private readonly stopping = new AbortController();
  private readonly typing: Typing;
  private readonly loops: Promise<void>[] = [];
  private wakeInbox: () => void = () => {};
  private readonly failures = new Map<number, number>();

  constructor(deps: LeaderDeps) {
    this.deps = deps;
    this.typing = new Typing(deps.api);
  }

  start(): void {
    this.loops.push(this.receive(), this.handleInbox(), this.deliverEvents());
  }

  /** Updates have been put in the inbox (by this instance's webhook route): handle them now. */
  inboxChanged(): void {
    this.wakeInbox();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.wakeInbox();
    this.typing.stopAll();
    await Promise.all(this.loops);
  }

  private get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  /** Runs `step` until stopped; a failure is logged and the step tried again after a pause. */
  private async loop(name: string, step: () => Promise<void>): Promise<void> {
    while (!this.stopped) {
      try {
        await step();
      } catch (error) {
        if (this.stopped) return;
        this.deps.log('warn', `telegram: ${name} failed; trying again`, { error: describeBotError(error) });
        await sleep(RETRY_MS, this.stopping.signal);
      }
    }
  }

  private async receive(): Promise<void> {
    const { api, settings, services } = this.deps;
    if (settings.webhookUrl) {
      await this.loop('setWebhook', async () => {
        await api.setWebhook(settings.webhookUrl!, { secret_token: this.deps.webhookSecret, allowed_updates: [...ALLOWED_UPDATES] });
        this.deps.log('info', 'telegram: receiving updates by webhook');
        await new Promise<void>((resolve) => this.stopping.signal.addEventListener('abort', () => resolve(), { once: true }));
      });
      return;
    }
    let offset: number | undefined;
    let webhookCleared = false;
    await this.loop('getUpdates', async () => {
      if (!webhookCleared) {
        await api.deleteWebhook(); // getUpdates is refused while a webhook is set
        webhookCleared = true;
      }
      const updates = await api.getUpdates({ offset, timeout: settings.pollTimeoutSeconds, allowed_updates: [...ALLOWED_UPDATES] }, this.stopping.signal as Parameters<Api['getUpdates']>[1]);
      if (updates.length === 0) return;
      // In the inbox before the next call confirms them to Telegram (the offset): none is lost.
      await services.telegramRelay.receive(updates);
      offset = updates.at(-1)!.update_id + 1;
      this.wakeInbox();
    });
  }

  private async handleInbox(): Promise<void> {
    const { services, api } = this.deps;
    await this.loop('handling updates', async () => {
      const pending = await services.telegramRelay.pendingUpdates();
      for (const { updateId, update } of pending) {
        if (this.stopped) return;
        try {
          await handleUpdate({ services, api, typing: this.typing }, update as Update);
        } catch (error) {
          // Tried again, in order, unless Telegram refuses for good (a blocked bot) or it keeps failing.
          const failures = (this.failures.get(updateId) ?? 0) + 1;
          this.failures.set(updateId, failures);
          if (!isPermanentRefusal(error) && failures < MAX_ATTEMPTS) throw error;
          this.deps.log('error', 'telegram: an update could not be handled; passed over', { updateId, error: describeBotError(error) });
        }
        this.failures.delete(updateId);
        await services.telegramRelay.updateDone(updateId);
      }
      if (pending.length > 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, INBOX_LOOK_MS);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wakeInbox = done;
      });
    });
  }

  private async deliverEvents(): Promise<void> {
    const { services, api } = this.deps;
    const listener = services.telegramRelay.listenForEvents();
    try {
      await this.loop('delivering events', async () => {
        const delivered = await deliverPending({ services, api, typing: this.typing });
        if (delivered === 0) await listener.next(EVENTS_LOOK_MS, this.stopping.signal);
      });
    } finally {
      listener.stop();
    }
  }
}
