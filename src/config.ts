import proxyAddr from '@fastify/proxy-addr';
import { resolve } from 'node:path';
import { DEFAULT_HISTORY_CHARACTERS, type ModelProvider, type ModelSettings } from './brains/model-settings.ts';
import { TELEGRAM_DEFAULT_API_ROOT, type TelegramSettings } from './channels/telegram/settings.ts';
import { shownUrl } from './domain/shown-url.ts';
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule } from './domain/webhooks.ts';
import { isRateLimitStore, POSTGRES_LIMITER_NEEDS_POSTGRES, RATE_LIMIT_STORES, resolvedRateLimitStore, type RateLimitStore } from './ratelimit/select.ts';
import { SQLITE_SYNCHRONOUS_MODES, type SqliteSynchronous } from './store/node-sqlite-adapter.ts';
import { DEFAULT_DATABASE_URL, isPostgresUrl, sqlitePathOf } from './store/store.ts';

/** Every server setting, read from the environment once. docs/configuration.md describes each of them. */
export interface Config {
  port: number;
  host: string;
  /** The listening socket's queue of connections not yet accepted (the kernel caps it at net.core.somaxconn). */
  listenBacklog: number;
  databaseUrl: string;
  sqliteSynchronous: SqliteSynchronous;
  /** PostgreSQL: the most connections this instance opens for its work (LISTEN takes one more). */
  pgPoolSize: number;
  logLevel: string;
  /** The longest a client may take to send a whole request (headers and body); then 408. */
  requestTimeoutMs: number;
  waitCeilingMs: number;
  duplicateWindowMs: number;
  idempotencyTtlMs: number;
  /** How long the event feed keeps events (EVENT_RETENTION_HOURS). */
  eventRetentionMs: number;
  defaultRateLimitPerMinute: number;
  maxRateLimitPerMinute: number;
  /** Messages a signed-in person may send a minute through the web chat (the API's keys have their own). */
  webChatRateLimitPerMinute: number;
  rateLimitStore: RateLimitStore;
  redisUrl: string;
  freeAgentLimit: number;
  proAgentLimit: number;
  agentConcurrency: number;
  /** Turns one instance runs at once; more wait in line (counted, and warned of). */
  runnerConcurrency: number;
  leaseMs: number;
  shutdownGraceMs: number;
  scryptCostLog2: number;
  webSessionIdleMinutes: number;
  /** Fastify's trustProxy: which proxies in front may name the client (see parseTrustProxy). */
  trustProxy: boolean | string[];
  /** Where people reach this server (PUBLIC_URL), without a trailing slash; null: as each request says (Host, or X-Forwarded-* through TRUST_PROXY). */
  publicUrl: string | null;
  instanceId: string;
  /** The model agents answer with; null: the built-in agent (contract §8). */
  model: ModelSettings | null;
  /** Pauses before each webhook retry, in milliseconds (WEBHOOK_RETRY_SCHEDULE). */
  webhookRetryScheduleMs: number[];
  /** WEBHOOK_ALLOW_PRIVATE_URLS: webhooks may go to http:// and private addresses. */
  webhookAllowPrivateUrls: boolean;
  /** The Telegram channel; null (no TELEGRAM_BOT_TOKEN): off. */
  telegram: TelegramSettings | null;
}

/** pino's levels. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** `maxFrom`: the setting the maximum comes from, named so that the way to a higher one is known. */
function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number, maxFrom?: string): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  // Written as a plain decimal integer: Number() would also take "1e3", "0x1F" or " 80 ".
  const value = /^-?\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be an integer between ${min} and ${max}${maxFrom ? ` (${maxFrom}: raise it for more)` : ''} (got "${raw}")`);
  }
  return value;
}

/**
 * TRUST_PROXY → which proxies in front may speak for the client through X-Forwarded-* (its IP
 * for the log-in throttle, https for Secure cookies): their addresses or ranges, as Fastify's
 * trustProxy takes them (checked by the library it uses, @fastify/proxy-addr), so that a client
 * reaching the port directly is never believed. A count of proxies is refused: Fastify itself
 * believes nobody given a number, because a count cannot tell a proxy from a client that
 * connects directly. `true` believes every hop, so a client can name any IP it likes unless the
 * proxy replaces the header rather than appending to it.
 */
/** The ranges proxy-addr knows by name (TRUST_PROXY=loopback for a proxy on this machine). */
const NAMED_RANGES = ['loopback', 'linklocal', 'uniquelocal'];

export function parseTrustProxy(raw: string | undefined): boolean | string[] {
  const value = (raw ?? '').trim();
  if (value === '' || value.toLowerCase() === 'false') return false;
  if (value.toLowerCase() === 'true') return true;
  // proxy-addr's named ranges are lowercase words; taken in any case, as every word of a setting is.
  const entries = value.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
    .map((entry) => (NAMED_RANGES.includes(entry.toLowerCase()) ? entry.toLowerCase() : entry));
  const refused = (why: string) => new Error(`TRUST_PROXY must be false, the proxies' addresses or ranges (e.g. 10.0.0.5,10.1.0.0/16,loopback), `
    + `or true (believes every X-Forwarded-For hop): ${why} (got "${raw}")`);
  // proxy-addr would read "1" as the address 0.0.0.1: say what a count does instead.
  if (/^\d+$/.test(value)) throw refused('a count of proxies cannot tell a proxy from a client that connects directly; name the proxy');
  try {
    proxyAddr.compile(entries);
  } catch (error) {
    throw refused((error as Error).message);
  }
  return entries;
}

/**
 * REDIS_URL must be a redis:// or rediss:// URL. ioredis guesses at anything else: a bare word
 * (`notaurl`) became a host name, so the server started and answered 503 for ever; a URL it could
 * not parse stopped the start with only "Invalid URL". The value is not echoed back: it may hold
 * a password.
 */
function checkRedisUrl(raw: string): void {
  checkUrlSetting('REDIS_URL', raw, ['redis:', 'rediss:'], 'a redis:// or rediss:// URL, such as redis://127.0.0.1:6379 or rediss://:password@host:6380/0');
}

/** A URL setting of one of `protocols`, refused saying what it must be; only a parsed value's protocol is echoed (a URL may hold a password). */
function checkUrlSetting(name: string, raw: string, protocols: string[], mustBe: string): void {
  let url: URL | null = null;
  try {
    url = new URL(raw);
  } catch {
    // said below
  }
  if (url && protocols.includes(url.protocol)) return;
  throw new Error(`${name} must be ${mustBe} (${url ? `got "${url.protocol}…"` : 'it cannot be read as a URL'})`);
}

/** PUBLIC_URL → the server's address as people reach it (the web app's ready-to-paste examples), or null. */
function parsePublicUrl(raw: string | undefined): string | null {
  const value = (raw ?? '').trim();
  if (value === '') return null;
  checkUrlSetting('PUBLIC_URL', value, ['http:', 'https:'], 'the http:// or https:// address people reach this server at, such as https://agents.example.com');
  const url = new URL(value);
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    throw new Error('PUBLIC_URL must be a plain address, with no user name, password, query or fragment, such as https://agents.example.com');
  }
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '');
}

const MODEL_PROVIDERS: readonly ModelProvider[] = ['openai-compatible', 'anthropic'];

/**
 * MODEL_* → the model agents answer with, or null (unset MODEL_PROVIDER) for the built-in agent.
 * MODEL_API_KEY is a secret: no refusal here names it or its value, and MODEL_BASE_URL is not
 * echoed either (a URL may carry credentials). The other MODEL_* settings are not judged while
 * no provider is chosen.
 */
function loadModelSettings(env: NodeJS.ProcessEnv): ModelSettings | null {
  const provider = (env.MODEL_PROVIDER ?? '').trim().toLowerCase();
  if (provider === '') return null;
  if (!MODEL_PROVIDERS.includes(provider as ModelProvider)) {
    throw new Error(`MODEL_PROVIDER must be ${MODEL_PROVIDERS.map((p) => `"${p}"`).join(' or ')}, or unset for the built-in agent (got "${env.MODEL_PROVIDER}")`);
  }
  const name = (env.MODEL_NAME ?? '').trim();
  if (name === '') {
    throw new Error(`MODEL_NAME is required with MODEL_PROVIDER=${provider}: the model to call, such as llama3.2 (Ollama), gpt-4o-mini or claude-sonnet-4-5`);
  }
  const rawBaseUrl = (env.MODEL_BASE_URL ?? '').trim();
  if (rawBaseUrl === '' && provider === 'openai-compatible') {
    throw new Error('MODEL_BASE_URL is required with MODEL_PROVIDER=openai-compatible: the server\'s OpenAI-compatible API, '
      + 'such as http://127.0.0.1:11434/v1 (Ollama) or https://api.openai.com/v1');
  }
  if (rawBaseUrl !== '') checkModelBaseUrl(rawBaseUrl);
  const systemPrompt = env.MODEL_SYSTEM_PROMPT ?? '';
  return {
    provider: provider as ModelProvider,
    name,
    baseUrl: rawBaseUrl === '' ? null : rawBaseUrl.replace(/\/+$/, ''),
    apiKey: checkedModelApiKey(env.MODEL_API_KEY),
    timeoutMs: int(env, 'MODEL_TIMEOUT_MS', 120_000, 1_000, 600_000),
    systemPrompt: systemPrompt.trim() === '' ? null : systemPrompt,
    historyCharacters: int(env, 'MODEL_HISTORY_CHARACTERS', DEFAULT_HISTORY_CHARACTERS, 0, 10_000_000),
    maxOutputTokens: (env.MODEL_MAX_OUTPUT_TOKENS ?? '') === '' ? null : int(env, 'MODEL_MAX_OUTPUT_TOKENS', 0, 1, 1_000_000),
  };
}

/**
 * MODEL_API_KEY goes in a header, which holds one line of Latin-1: any other key failed every
 * model call (fetch refuses the header) with no request made. Refused at start, never echoed.
 */
function checkedModelApiKey(raw: string | undefined): string | null {
  if (!raw) return null;
  if (!/^[\x20-\x7e\xa0-\xff]+$/.test(raw)) {
    throw new Error('MODEL_API_KEY must be one line of printable characters (it goes in a header; a line break, say, fails every call)');
  }
  return raw;
}

function checkModelBaseUrl(raw: string): void {
  checkUrlSetting('MODEL_BASE_URL', raw, ['http:', 'https:'], 'an http:// or https:// URL, such as http://127.0.0.1:11434/v1');
  // fetch refuses a URL with credentials (every call would fail), and the start-up line shows the user name.
  const url = new URL(raw);
  if (url.username !== '' || url.password !== '') throw new Error('MODEL_BASE_URL must not hold a user name or password: the key goes in MODEL_API_KEY');
}

/** A true/false setting: unset or empty is `fallback`. */
function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = (env[name] ?? '').trim().toLowerCase();
  if (raw === '') return fallback;
  if (raw === 'true' || raw === 'false') return raw === 'true';
  throw new Error(`${name} must be true or false (got "${env[name]}")`);
}

/** TELEGRAM_*: the Telegram channel, on when TELEGRAM_BOT_TOKEN is set (docs/telegram.md). */
function loadTelegramSettings(env: NodeJS.ProcessEnv): TelegramSettings | null {
  const token = env.TELEGRAM_BOT_TOKEN ?? '';
  if (token === '') return null;
  // Never echoed: it is the bot's password.
  if (!/^\d{1,20}:[A-Za-z0-9_-]{20,100}$/.test(token)) throw new Error('TELEGRAM_BOT_TOKEN must be a token as BotFather gives it, such as 123456789:AAE… (digits, a colon, then letters, digits, _ and -)');
  const apiRoot = (env.TELEGRAM_API_ROOT || TELEGRAM_DEFAULT_API_ROOT).replace(/\/+$/, '');
  checkUrlSetting('TELEGRAM_API_ROOT', apiRoot, ['http:', 'https:'], 'an http:// or https:// URL, such as https://api.telegram.org');
  const webhookUrl = env.TELEGRAM_WEBHOOK_URL || null;
  if (webhookUrl !== null) checkUrlSetting('TELEGRAM_WEBHOOK_URL', webhookUrl, ['https:', 'http:'], 'the https:// URL at which Telegram reaches this server\'s /telegram/webhook');
  const webhookSecret = env.TELEGRAM_WEBHOOK_SECRET || null;
  if (webhookSecret !== null && !/^[A-Za-z0-9_-]{16,256}$/.test(webhookSecret)) {
    throw new Error('TELEGRAM_WEBHOOK_SECRET must be 16 to 256 characters of A-Z, a-z, 0-9, _ and - (Telegram\'s rule)');
  }
  return {
    botToken: token, apiRoot, webhookUrl, webhookSecret,
    leaseMs: int(env, 'TELEGRAM_LEASE_MS', 15_000, 1_000, 600_000),
    pollTimeoutSeconds: int(env, 'TELEGRAM_POLL_TIMEOUT_SECONDS', 25, 0, 50),
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const maxRateLimitPerMinute = int(env, 'MAX_RATE_LIMIT_PER_MINUTE', 10_000, 1, 100_000_000);
  // Unset: follow the database (memory on SQLite, postgres on PostgreSQL); see ratelimit/select.ts.
  const rateLimitStore = (env.RATE_LIMIT_STORE || 'auto').toLowerCase();
  if (!isRateLimitStore(rateLimitStore)) {
    const named = RATE_LIMIT_STORES.filter((store) => store !== 'auto').map((store) => `"${store}"`).join(', ');
    throw new Error(`RATE_LIMIT_STORE must be one of ${named}, or unset to follow the database (got "${env.RATE_LIMIT_STORE}")`);
  }
  // Refused here already, so that a misconfigured server stops before it opens anything.
  if (rateLimitStore === 'postgres' && !isPostgresUrl(env.DATABASE_URL ?? '')) throw new Error(POSTGRES_LIMITER_NEEDS_POSTGRES);
  const redisUrl = env.REDIS_URL || 'redis://127.0.0.1:6379';
  if (rateLimitStore === 'redis') checkRedisUrl(redisUrl); // (unused, and so not judged, by the other stores)
  const sqliteSynchronous = (env.SQLITE_SYNCHRONOUS || 'full').toLowerCase();
  if (!SQLITE_SYNCHRONOUS_MODES.includes(sqliteSynchronous as SqliteSynchronous)) {
    throw new Error(`SQLITE_SYNCHRONOUS must be ${SQLITE_SYNCHRONOUS_MODES.map((mode) => `"${mode}"`).join(' or ')} (got "${env.SQLITE_SYNCHRONOUS}")`);
  }
  const databaseUrl = env.DATABASE_URL || DEFAULT_DATABASE_URL;
  // pg would stop the start with URL's own "Invalid URL", naming no setting (the value may hold a password: not echoed).
  if (isPostgresUrl(databaseUrl)) {
    checkUrlSetting('DATABASE_URL', databaseUrl, ['postgres:', 'postgresql:'], 'sqlite:<path> or a PostgreSQL URL, such as postgres://user:password@127.0.0.1:5432/agent_channel');
  }
  const logLevel = (env.LOG_LEVEL || 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) throw new Error(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${env.LOG_LEVEL}")`);
  const model = loadModelSettings(env);
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: env.HOST || '127.0.0.1',
    // Node's own 511 overflowed when thousands of clients connected at once: resets and hung requests.
    listenBacklog: int(env, 'LISTEN_BACKLOG', 4096, 1, 1_000_000),
    databaseUrl,
    sqliteSynchronous: sqliteSynchronous as SqliteSynchronous,
    pgPoolSize: int(env, 'PG_POOL_SIZE', 10, 2, 1000),
    logLevel,
    requestTimeoutMs: int(env, 'REQUEST_TIMEOUT_MS', 60_000, 1_000, 3_600_000),
    waitCeilingMs: int(env, 'WAIT_CEILING_MS', 25_000, 0, 600_000),
    duplicateWindowMs: int(env, 'DUPLICATE_WINDOW_MS', 10_000, 0, 3_600_000),
    idempotencyTtlMs: int(env, 'IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 30) * 3_600_000,
    eventRetentionMs: int(env, 'EVENT_RETENTION_HOURS', 168, 1, 24 * 365) * 3_600_000,
    defaultRateLimitPerMinute: int(env, 'DEFAULT_RATE_LIMIT_PER_MINUTE', 60, 1, maxRateLimitPerMinute, 'MAX_RATE_LIMIT_PER_MINUTE'),
    maxRateLimitPerMinute,
    webChatRateLimitPerMinute: int(env, 'WEB_CHAT_RATE_LIMIT_PER_MINUTE', 60, 1, maxRateLimitPerMinute, 'MAX_RATE_LIMIT_PER_MINUTE'),
    rateLimitStore,
    redisUrl,
    freeAgentLimit: int(env, 'FREE_PLAN_AGENT_LIMIT', 1, 0, 1_000_000),
    proAgentLimit: int(env, 'PRO_PLAN_AGENT_LIMIT', 100, 0, 1_000_000),
    agentConcurrency: int(env, 'AGENT_CONCURRENCY', 1, 1, 1000),
    // A turn mostly waits on its model (or its tools), not on this process's CPU: the cap is
    // about memory, and a waiting turn holds little of it.
    runnerConcurrency: int(env, 'RUNNER_CONCURRENCY', 10_000, 1, 1_000_000),
    leaseMs: int(env, 'JOB_LEASE_MS', 15_000, 1_000, 3_600_000),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    scryptCostLog2: int(env, 'SCRYPT_COST_LOG2', 17, 10, 20),
    webSessionIdleMinutes: int(env, 'WEB_SESSION_IDLE_MINUTES', 120, 1, 60 * 24 * 30),
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    publicUrl: parsePublicUrl(env.PUBLIC_URL),
    instanceId: env.INSTANCE_ID || `${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
    model,
    webhookRetryScheduleMs: parseRetrySchedule(env.WEBHOOK_RETRY_SCHEDULE || DEFAULT_RETRY_SCHEDULE),
    webhookAllowPrivateUrls: bool(env, 'WEBHOOK_ALLOW_PRIVATE_URLS', false),
    telegram: loadTelegramSettings(env),
  };
}

/**
 * What the server's start-up line says of its settings: the ones that decide where data goes
 * and how work runs, secrets left out (URLs through shownUrl), so that an operator reading the
 * log knows what this process is doing without reading its environment.
 */
export function settingsForLog(config: Config): Record<string, unknown> {
  const onPostgres = isPostgresUrl(config.databaseUrl);
  const rateLimitStore = resolvedRateLimitStore(config.rateLimitStore, onPostgres);
  const path = onPostgres ? null : sqlitePathOf(config.databaseUrl);
  return {
    database: onPostgres ? shownUrl(config.databaseUrl) : `sqlite:${path === ':memory:' ? path : resolve(path!)}`,
    ...(onPostgres ? { pgPoolSize: config.pgPoolSize } : { sqliteSynchronous: config.sqliteSynchronous }),
    rateLimitStore,
    ...(rateLimitStore === 'redis' ? { redis: shownUrl(config.redisUrl) } : {}),
    waitCeilingMs: config.waitCeilingMs,
    duplicateWindowMs: config.duplicateWindowMs,
    agentConcurrency: config.agentConcurrency,
    runnerConcurrency: config.runnerConcurrency,
    listenBacklog: config.listenBacklog,
    shutdownGraceMs: config.shutdownGraceMs,
    trustProxy: config.trustProxy,
    instanceId: config.instanceId,
    webhookAllowPrivateUrls: config.webhookAllowPrivateUrls,
    // Which brain answers; the model's key is never named.
    agents: config.model
      ? { provider: config.model.provider, model: config.model.name, ...(config.model.baseUrl ? { baseUrl: shownUrl(config.model.baseUrl) } : {}) }
      : 'built-in',
    telegram: config.telegram ? { apiRoot: shownUrl(config.telegram.apiRoot), mode: config.telegram.webhookUrl ? 'webhook' : 'long polling' } : 'off',
  };
}
