import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services/services.ts';
import { botApi, describeBotError, sleep } from './bot-api.ts';
import { Leader, type ChannelLog } from './leader.ts';
import { TELEGRAM_WEBHOOK_PATH, type TelegramSettings } from './settings.ts';

export interface TelegramChannelDeps {
  settings: TelegramSettings;
  services: Services;
  instanceId: string;
  log: ChannelLog;
}

/**
 * The Telegram channel (docs/telegram.md). Every instance takes webhook calls (webhook mode);
 * one instance at a time, the holder of a lease in the database renewed every third of
 * TELEGRAM_LEASE_MS, polls Telegram, handles the updates and delivers the event feed. When it
 * dies its lease runs out and another instance takes over.
 */
export class TelegramChannel {
  private readonly deps: TelegramChannelDeps;
  private readonly stopping = new AbortController();
  private readonly api;
  private readonly webhookSecret: Buffer;
  private leader: Leader | null = null;
  private leaseLoop: Promise<void> | null = null;

  constructor(deps: TelegramChannelDeps) {
    this.deps = deps;
    this.api = botApi(deps.settings, this.stopping.signal);
    this.webhookSecret = Buffer.from(deps.settings.webhookSecret ?? derivedSecret(deps.settings.botToken));
  }

  start(): void {
    this.leaseLoop = this.holdLease();
    void this.learnBotName();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.leaseLoop;
  }

  /** The webhook route: the secret header checked in constant time, the update kept, 200 at once. */
  routes(app: FastifyInstance): void {
    app.post(TELEGRAM_WEBHOOK_PATH, { schema: { hide: true } }, async (request, reply) => {
      if (!this.deps.settings.webhookUrl) return reply.code(404).send({ ok: false });
      const given = request.headers['x-telegram-bot-api-secret-token'];
      if (typeof given !== 'string' || !sameSecret(Buffer.from(given), this.webhookSecret)) return reply.code(401).send({ ok: false });
      const update = request.body as { update_id?: unknown } | null;
      if (!update || typeof update !== 'object' || !Number.isSafeInteger(update.update_id)) return reply.code(400).send({ ok: false });
      await this.deps.services.telegramRelay.receive([update as { update_id: number }]);
      this.leader?.inboxChanged();
      return reply.code(200).send({ ok: true });
    });
  }

  private async learnBotName(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      try {
        const me = await this.api.getMe();
        this.deps.services.telegramLinks.botUsername = me.username;
        return;
      } catch (error) {
        this.deps.log('warn', 'telegram: getMe failed (is TELEGRAM_BOT_TOKEN right, and Telegram reachable?); trying again', { error: describeBotError(error) });
        await sleep(5_000, this.stopping.signal);
      }
    }
  }

  private async holdLease(): Promise<void> {
    const { settings, services, instanceId, log } = this.deps;
    let renewedAt = 0;
    while (!this.stopping.signal.aborted) {
      try {
        const held = await services.telegramRelay.claimLease(instanceId, settings.leaseMs);
        if (held) renewedAt = Date.now();
        if (held && !this.leader) {
          log('info', 'telegram: this instance now polls and delivers');
          this.leader = new Leader({ settings, services, api: this.api, log, webhookSecret: this.webhookSecret.toString() });
          this.leader.start();
        } else if (!held && this.leader) {
          await this.stepDown('telegram: another instance holds the lease now');
        }
      } catch (error) {
        log('warn', 'telegram: the lease could not be renewed', { error: describeBotError(error) });
      }
      // Unrenewed for most of its length, the lease may pass to another instance: stop first.
      if (this.leader && Date.now() - renewedAt > (settings.leaseMs * 2) / 3) await this.stepDown('telegram: the lease could not be renewed in time');
      await sleep(settings.leaseMs / 3, this.stopping.signal);
    }
    if (this.leader) {
      await this.leader.stop();
      this.leader = null;
      await services.telegramRelay.releaseLease(instanceId).catch(() => {});
    }
  }

  private async stepDown(why: string): Promise<void> {
    this.deps.log('info', why);
    const leader = this.leader;
    this.leader = null;
    await leader?.stop();
  }
}

/** The webhook's secret when TELEGRAM_WEBHOOK_SECRET is unset: the token's, never the token itself. */
const derivedSecret = (token: string): string => createHash('sha256').update(`agent-channel telegram webhook ${token}`).digest('base64url');

function sameSecret(given: Buffer, expected: Buffer): boolean {
  // Compared as digests: equal lengths, and the time says nothing about where they differ.
  const digest = (value: Buffer) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** The channel as a Fastify plugin: the webhook route, started when the app is ready, stopped as it closes. */
export function telegramChannel(deps: TelegramChannelDeps) {
  return async function register(scope: FastifyInstance): Promise<void> {
    const channel = new TelegramChannel(deps);
    channel.routes(scope);
    scope.addHook('onReady', async () => {
      channel.start();
    });
    scope.addHook('onClose', async () => channel.stop());
  };
}
