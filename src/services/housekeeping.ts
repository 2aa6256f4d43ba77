import { sweepIdleRateLimits } from '../ratelimit/postgres.ts';
import type { Store } from '../store/store.ts';
import type { FeedService } from './feed.ts';
import type { TelegramRelay } from './telegram/relay.ts';
import type { LoginThrottle } from './login-throttle.ts';
import type { MissionsService } from './missions/index.ts';
import type { WebSessionsService } from './web-sessions.ts';
import type { WebhooksService } from './webhooks/index.ts';

/**
 * Periodic clean-up, so that nothing needs babysitting: expired idempotency records,
 * duplicate-window claims, web app sessions that are over (idle too long, or past their end;
 * nobody may come back to delete them on sight) and log-in attempts out of their window are
 * deleted, so are events and finished webhook deliveries past their retention, Telegram updates
 * past a redelivery and (on PostgreSQL) the rate-limit rows of idle keys, and missions nobody can
 * settle any more are closed.
 */
export class Housekeeping {
  private timer: NodeJS.Timeout | null = null;
  /** The run under way, if any: a tick never starts a second one, and stop() waits for it. */
  private running: Promise<unknown> | null = null;
  private readonly deps: { store: Store; missions: MissionsService; feed: FeedService; webhooks: WebhooksService; webSessions: WebSessionsService; loginThrottle: LoginThrottle; telegramRelay: TelegramRelay; idempotencyTtlMs: number; duplicateWindowMs: number };

  constructor(deps: Housekeeping['deps']) {
    this.deps = deps;
  }

  start(everyMs = 60_000, onError: (error: unknown) => void = () => {}): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.running) return; // a slow sweep (a grown database) is not run twice at once
      this.running = this.runOnce().catch(onError).finally(() => { this.running = null; });
    }, everyMs);
    this.timer.unref();
  }

  /** Stops the timer and waits for a run under way, so that nothing runs after (the store may close next). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** `now` by the store's clock, which the records' times were written by, whichever instance wrote them. */
  async runOnce(now = this.deps.store.clock.now()): Promise<{ idempotencyKeys: number; recentMessages: number; rateLimitRows: number; webSessions: number; loginAttempts: number; events: number; webhookDeliveries: number; telegramUpdates: number } & Awaited<ReturnType<MissionsService['sweep']>>> {
    const { db } = this.deps.store;
    const keys = await db.deleteFrom('idempotency_keys')
      .where('created_at', '<', new Date(now - this.deps.idempotencyTtlMs).toISOString()).executeTakeFirst();
    const recent = await db.deleteFrom('recent_messages')
      .where('created_at', '<', new Date(now - Math.max(this.deps.duplicateWindowMs, 1000)).toISOString()).executeTakeFirst();
    // Whichever limiter this instance uses: rows another instance (or an earlier setting) left
    // in PostgreSQL are cleared too; one cheap delete a minute. The rate-limit log judges by the
    // database's clock, so `now` does not apply to it.
    const rateLimitRows = this.deps.store.pgPool ? await sweepIdleRateLimits(this.deps.store.pgPool) : 0;
    const webSessions = await this.deps.webSessions.sweep(new Date(now));
    const loginAttempts = await this.deps.loginThrottle.sweep(now);
    const missions = await this.deps.missions.sweep();
    const events = await this.deps.feed.purgeExpired(now);
    const webhookDeliveries = await this.deps.webhooks.purgeFinished(now);
    const telegramUpdates = await this.deps.telegramRelay.forgetOldUpdates(now);
    return {
      idempotencyKeys: Number(keys.numDeletedRows), recentMessages: Number(recent.numDeletedRows), rateLimitRows, webSessions, loginAttempts, events,
      webhookDeliveries, telegramUpdates, ...missions,
    };
  }
}
