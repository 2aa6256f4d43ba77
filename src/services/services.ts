import type { Brain } from '../brains/brain.ts';
import type { ToolRegistry } from '../brains/tools.ts';
import type { Config } from '../config.ts';
import type { TurnEngine } from '../engine/turn-engine.ts';
import type { Store } from '../store/store.ts';
import { AccountsService } from './accounts.ts';
import { AgentsService } from './agents.ts';
import { ConversationsService } from './conversations.ts';
import { KeysService } from './keys.ts';
import { LoginThrottle } from './login-throttle.ts';
import { Housekeeping } from './housekeeping.ts';
import { MissionsService } from './missions.ts';
import { RequestCache } from './request-cache.ts';
import { TurnWorker } from './turn-worker.ts';
import { WebSessionsService } from './web-sessions.ts';

/** Every use case, wired once; channels and the CLI reach them through this object. */
export interface Services {
  accounts: AccountsService;
  keys: KeysService;
  agents: AgentsService;
  conversations: ConversationsService;
  missions: MissionsService;
  webSessions: WebSessionsService;
  loginThrottle: LoginThrottle;
  housekeeping: Housekeeping;
  /** What requests read of keys and agents, kept between them (the server looks for other processes' writes at each request). */
  requestCache: RequestCache;
}

export interface ServiceDeps {
  store: Store;
  config: Config;
  engine: TurnEngine;
  brain: Brain;
  tools: ToolRegistry;
}

export function createServices({ store, config, engine, brain, tools }: ServiceDeps): Services {
  const requestCache = new RequestCache(store);
  const accounts = new AccountsService({ store, requestCache, scryptCostLog2: config.scryptCostLog2 });
  const keys = new KeysService({
    store, requestCache, defaultRateLimitPerMinute: config.defaultRateLimitPerMinute, maxRateLimitPerMinute: config.maxRateLimitPerMinute,
  });
  const agents = new AgentsService({ store, requestCache, accounts, freeAgentLimit: config.freeAgentLimit, proAgentLimit: config.proAgentLimit });
  const conversations = new ConversationsService({
    store, engine, agents,
    waitCeilingMs: config.waitCeilingMs, duplicateWindowMs: config.duplicateWindowMs, idempotencyTtlMs: config.idempotencyTtlMs,
  });
  const missions = new MissionsService({ store, engine, brain });
  engine.setHandler(new TurnWorker({ store, brain, tools }));
  const webSessions = new WebSessionsService({ store, idleMinutes: config.webSessionIdleMinutes });
  const loginThrottle = new LoginThrottle(store);
  const housekeeping = new Housekeeping({
    store, missions, webSessions, loginThrottle, idempotencyTtlMs: config.idempotencyTtlMs, duplicateWindowMs: config.duplicateWindowMs,
  });
  return { accounts, keys, agents, conversations, missions, webSessions, loginThrottle, housekeeping, requestCache };
}
