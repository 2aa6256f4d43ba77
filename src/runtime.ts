import type { Brain } from './brains/brain.ts';
import { BuiltinBrain } from './brains/builtin.ts';
import type { ModelWarning } from './brains/llm.ts';
import { builtinToolRegistry, type ToolRegistry } from './brains/tools.ts';
import type { Config } from './config.ts';
import { InProcessBus, PostgresBus, type Bus } from './engine/bus.ts';
import { TurnEngine, type TurnObserver } from './engine/turn-engine.ts';
import type { RateLimiter } from './ratelimit/rate-limiter.ts';
import { createRateLimiter } from './ratelimit/select.ts';
import { createServices, type Services } from './services/services.ts';
import { TurnWorker } from './services/turn-worker.ts';
import { DeliveryWorker } from './services/webhooks/delivery-worker.ts';
import { SecretBox } from './services/webhooks/secret-box.ts';
import { cannotConnectToPostgres, openStore, splitSchemaParam, type OpenStoreOptions, type Store } from './store/store.ts';

/** Everything one instance holds: built once at start, closed once at shutdown. */
export interface Runtime {
  config: Config;
  store: Store;
  bus: Bus;
  engine: TurnEngine;
  services: Services;
  /** Delivers webhooks; started with the engine. */
  webhookDeliveries: DeliveryWorker;
  rateLimiter: RateLimiter;
  /** Starts running turns (the server does; the CLI does not). On SQLite, claims the file first (Store.claimForServer). */
  startEngine(): Promise<void>;
  /** Stops the engine within the grace period, then closes connections. */
  close(graceMs?: number): Promise<void>;
}

export interface RuntimeOptions {
  config: Config;
  /** How the store opens (`forServer`: claim the SQLite file first; `pgSchema`: a test's schema). */
  storeOptions?: OpenStoreOptions;
  /** Where failures of background work are told (the engine, the bus, housekeeping, the rate limit store). */
  logError?: (error: unknown, context: string) => void;
  /**
   * The tool registry: the built-in one takes any kind, always behind permission, with no outside
   * effect; a deployment registers its real tools in code.
   */
  tools?: ToolRegistry;
  /** Where a failed model call is told (the model-backed brain's warnings), and a failed webhook attempt. */
  logWarning?: ModelWarning;
}

/**
 * The composition root: config → brain → store → bus → engine (with the turn worker as its
 * handler) → services and the rate limiter.
 */
export async function createRuntime({
  config, storeOptions = {}, logError = () => {}, tools = builtinToolRegistry(), logWarning = () => {},
}: RuntimeOptions): Promise<Runtime> {
  const brain = await createBrain(config, tools, logWarning);
  const store = await openStore(config.databaseUrl, { sqliteSynchronous: config.sqliteSynchronous, pgPoolSize: config.pgPoolSize, ...storeOptions });
  // The bus connects before the engine exists; a reconnection from then on catches the engine up.
  let afterReconnect = (): void => {};
  let bus: Bus;
  try {
    bus = store.dialect === 'postgres'
      ? await PostgresBus.connect(splitSchemaParam(config.databaseUrl).url, store.pgSchema, () => afterReconnect())
      : new InProcessBus();
  } catch (error) {
    await store.close();
    throw cannotConnectToPostgres(config.databaseUrl, error);
  }
  const engine = new TurnEngine({
    store, bus, instanceId: config.instanceId, perAgent: config.agentConcurrency,
    concurrency: config.runnerConcurrency, leaseMs: config.leaseMs, onError: logError,
  });
  afterReconnect = () => void engine.caughtUp().catch((error: unknown) => logError(error, 'catching up after the bus reconnected'));
  engine.setHandler(new TurnWorker({ store, brain, tools }));
  engine.observe(warnWhenTurnsWaitForSlots(logWarning));
  const secrets = new SecretBox(store);
  const services = createServices({ store, config, engine, brain, secrets });
  const webhookDeliveries = new DeliveryWorker({
    store, bus, secrets, instanceId: config.instanceId, retrySchedule: config.webhookRetryScheduleMs,
    allowPrivateUrls: config.webhookAllowPrivateUrls, logFailure: logWarning, onError: logError,
  });
  services.webhooks.onNewDelivery(() => webhookDeliveries.wake());
  const rateLimiter: RateLimiter = await createRateLimiter(config.rateLimitStore, store, config.redisUrl,
    (error) => logError(error, 'the rate limit store (Redis, at REDIS_URL) cannot be reached: API requests get 503 until it is back'));
  return {
    config, store, bus, engine, services, webhookDeliveries, rateLimiter,
    async startEngine() {
      store.claimForServer();
      store.startBackgroundCheckpoints((error) => logError(error, 'background checkpoints (SQLite checkpoints on commit instead)'));
      store.startClockSync((error) => logError(error, 'measuring the clock against the database server\'s (the last offset stays in use)'));
      await engine.start();
      await webhookDeliveries.start();
      services.housekeeping.start(60_000, (error) => logError(error, 'housekeeping'));
    },
    async close(graceMs = 0) {
      await services.housekeeping.stop();
      await webhookDeliveries.stop();
      await engine.stop(graceMs);
      await rateLimiter.close();
      await bus.close();
      await services.keys.settled(); // a last_used_at write still in flight lands before the store closes
      await store.close();
    },
  };
}

/** The built-in agent, or with MODEL_PROVIDER set the model-backed brain (the AI SDK is loaded only then). */
async function createBrain(config: Config, tools: ToolRegistry, logWarning: ModelWarning): Promise<Brain> {
  if (!config.model) return new BuiltinBrain();
  const { LlmBrain } = await import('./brains/llm.ts');
  return new LlmBrain(config.model, tools, logWarning);
}

/** How often, at most, the log says that turns wait for a runner slot (the metric counts every one). */
const SLOT_WARNING_EVERY_MS = 60_000;

/** A warning when accepted turns wait in line because every RUNNER_CONCURRENCY slot is busy: at most once a minute. */
function warnWhenTurnsWaitForSlots(logWarning: ModelWarning): TurnObserver {
  let lastWarnedAt = Number.NEGATIVE_INFINITY;
  let sinceLastWarning = 0;
  return {
    started() {},
    ended() {},
    waitsForSlot({ concurrency }) {
      sinceLastWarning++;
      const now = performance.now();
      if (now - lastWarnedAt < SLOT_WARNING_EVERY_MS) return;
      logWarning({ runnerConcurrency: concurrency, waitedSinceLastWarning: sinceLastWarning },
        'every RUNNER_CONCURRENCY slot is busy: accepted turns wait in line for one (raise RUNNER_CONCURRENCY if memory allows, or add an instance)');
      lastWarnedAt = now;
      sinceLastWarning = 0;
    },
  };
}
