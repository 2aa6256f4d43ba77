import type { Brain } from '../brains/brain.ts';
import type { TurnEngine } from '../engine/turn-engine.ts';
import type { Store } from '../store/store.ts';
import { AccountsService } from './accounts.ts';
import { AgentsService } from './agents.ts';
import { ConversationsService } from './conversations/index.ts';
import { FeedService } from './feed.ts';
import { KeysService } from './keys.ts';
import { LoginThrottle } from './login-throttle.ts';
import { Housekeeping } from './housekeeping.ts';
import { MissionsService } from './missions/index.ts';
import { RequestCache } from './request-cache.ts';
import { TelegramLinks } from './telegram/links.ts';
import { TelegramRelay } from './telegram/relay.ts';
import { WebSessionsService } from './web-sessions.ts';
import { SecretBox } from './webhooks/secret-box.ts';
import { WebhooksService } from './webhooks/index.ts';

/** Every use case, wired once; channels and the CLI reach them through this object. */
export interface Services {
  accounts: AccountsService;
  keys: KeysService;
  agents: AgentsService;
  conversations: ConversationsService;
  missions: MissionsService;
  feed: FeedService;
  webSessions: WebSessionsService;
  loginThrottle: LoginThrottle;
  housekeeping: Housekeeping;
  webhooks: WebhooksService;
  /** Linking Telegram chats to accounts (the web app, the CLI and the bot use it). */
  telegramLinks: TelegramLinks;
  /** The Telegram channel's state: its inbox, chats, delivery cursors and lease. */
  telegramRelay: TelegramRelay;
  /** What requests read of keys and agents, kept between them (the server looks for other processes' writes at each request). */
  requestCache: RequestCache;
}

/** The deployment's settings the use cases read (the server's Config holds them; docs/configuration.md lists each). */
export interface ServiceSettings {
  scryptCostLog2: number;
  defaultRateLimitPerMinute: number;
  maxRateLimitPerMinute: number;
  freeAgentLimit: number;
  proAgentLimit: number;
  waitCeilingMs: number;
  duplicateWindowMs: number;
  idempotencyTtlMs: number;
  eventRetentionMs: number;
  webSessionIdleMinutes: number;
  webhookAllowPrivateUrls: boolean;
}

export interface ServiceDeps {
  store: Store;
  config: ServiceSettings;
  engine: TurnEngine;
  brain: Brain;
}

export function createServices({ store, config, engine, brain, secrets = new SecretBox(store) }: ServiceDeps & { secrets?: SecretBox }): Services {
  const requestCache = new RequestCache(store);
  const accounts = new AccountsService({ store, agentListCache: requestCache.agentLists, scryptCostLog2: config.scryptCostLog2 });
  const keys = new KeysService({
    store, keyCache: requestCache.keys, defaultRateLimitPerMinute: config.defaultRateLimitPerMinute, maxRateLimitPerMinute: config.maxRateLimitPerMinute,
  });
  const agents = new AgentsService({ store, agentListCache: requestCache.agentLists, accounts, freeAgentLimit: config.freeAgentLimit, proAgentLimit: config.proAgentLimit });
  const conversations = new ConversationsService({
    store, engine, agents,
    waitCeilingMs: config.waitCeilingMs, duplicateWindowMs: config.duplicateWindowMs, idempotencyTtlMs: config.idempotencyTtlMs,
  });
  const missions = new MissionsService({ store, engine, brain });
  const feed = new FeedService({ store, wakeups: engine.wakeups, retentionMs: config.eventRetentionMs });
  const webSessions = new WebSessionsService({ store, idleMinutes: config.webSessionIdleMinutes });
  const loginThrottle = new LoginThrottle(store);
  const telegramRelay = new TelegramRelay(store, feed);
  const webhooks = new WebhooksService({ store, secrets, allowPrivateUrls: config.webhookAllowPrivateUrls, retentionMs: config.eventRetentionMs });
  const housekeeping = new Housekeeping({
    store, missions, feed, webhooks, webSessions, loginThrottle, telegramRelay, idempotencyTtlMs: config.idempotencyTtlMs, duplicateWindowMs: config.duplicateWindowMs,
  });
  const telegramLinks = new TelegramLinks(store);
  return { accounts, keys, agents, conversations, missions, feed, webSessions, loginThrottle, housekeeping, webhooks, requestCache, telegramLinks, telegramRelay };
}
