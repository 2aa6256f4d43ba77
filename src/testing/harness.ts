import { mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { after, before } from 'node:test';
import pg from 'pg';
import { buildApp } from '../app.ts';
import type { ModelWarning } from '../brains/llm.ts';
import type { ToolRegistry } from '../brains/tools.ts';
import { loadConfig, type Config } from '../config.ts';
import { randomBase62 } from '../domain/ids.ts';
import { createRuntime, type Runtime } from '../runtime.ts';
import type { Plan } from '../store/schema.ts';

/**
 * Test harness: a real store (a fresh SQLite file, or a fresh PostgreSQL schema when
 * TEST_DB=postgres), the real app, and helpers to make users and keys. No mocks.
 */
export const TEST_DB = (process.env.TEST_DB ?? 'sqlite') as 'sqlite' | 'postgres';
export const TEST_PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const API = '/api/v1/api-channel';

export interface TestDatabase {
  url: string;
  pgSchema?: string;
  drop(): Promise<void>;
}

/** A database nobody else uses, removed by drop(); `name` (a schema or folder name) is random unless given. */
export async function freshDatabase(name = `t_${randomBase62(12).toLowerCase()}`): Promise<TestDatabase> {
  if (TEST_DB === 'postgres') {
    return {
      url: TEST_PG_URL,
      pgSchema: name,
      async drop() {
        const client = new pg.Client({ connectionString: TEST_PG_URL });
        await client.connect();
        try {
          await client.query(`drop schema if exists ${name} cascade`);
        } finally {
          await client.end();
        }
      },
    };
  }
  const dir = join(tmpdir(), 'agent-channel-tests', name);
  mkdirSync(dir, { recursive: true });
  return { url: `sqlite:${join(dir, 'test.db')}`, async drop() { rmSync(dir, { recursive: true, force: true }); } };
}

/** Environment variables that make a child process (server or CLI) use this database. */
/**
 * The test process's environment for a server or CLI it starts, without the MODEL_* settings: a
 * developer's exported model (or a bad one) must not make the built-in agent's tests call it.
 * Tests of the model-backed brain set the MODEL_* they mean.
 */
export function childEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('MODEL_')));
}

export function databaseEnv(database: TestDatabase): Record<string, string> {
  if (!database.pgSchema) return { DATABASE_URL: database.url };
  const url = new URL(database.url);
  url.searchParams.set('schema', database.pgSchema);
  return { DATABASE_URL: url.toString() };
}

export function testConfig(database: TestDatabase, overrides: Partial<Config> = {}): Config {
  return { ...loadConfig({}), databaseUrl: database.url, scryptCostLog2: 10, ...overrides };
}

/** A fresh database with one pro account, for tests that start real server processes (see seededDatabase). */
export interface SeededDatabase {
  database: TestDatabase;
  /** What a server process needs to use it, extra settings included. */
  env: Record<string, string>;
  key: string;
  agentIds: string[];
}

/**
 * Registers in the calling file (or suite) a fresh database seeded with one pro account before its
 * tests, and its removal after them. The fields are there once `before` has run.
 */
export function seededDatabase(email: string, agents: number, extraEnv: Record<string, string> = {}): SeededDatabase {
  const seeded = {} as SeededDatabase;
  before(async () => {
    seeded.database = await freshDatabase();
    seeded.env = { ...databaseEnv(seeded.database), ...extraEnv };
    Object.assign(seeded, await seedAccount(seeded.database, email, agents));
  });
  after(async () => { await seeded.database?.drop(); });
  return seeded;
}

/**
 * A pro user with `agents` agents and one API key (10,000 a minute), written straight to
 * `database`: for tests whose server runs as a child process, set up before it starts.
 */
export async function seedAccount(database: TestDatabase, email: string, agents: number): Promise<{ key: string; agentIds: string[] }> {
  const runtime = await createRuntime({ config: testConfig(database), storeOptions: database.pgSchema ? { pgSchema: database.pgSchema } : {} });
  try {
    const user = await runtime.services.accounts.createUser({ email, password: 'a long password', plan: 'pro' });
    const agentIds: string[] = [];
    for (let i = 0; i < agents; i++) agentIds.push((await runtime.services.agents.create(user.id, { agent_name: `Agent ${i}` })).agent_id);
    const { token } = await runtime.services.keys.create(user.id, { label: 'process test', rate_limit: 10_000 });
    return { key: token, agentIds };
  } finally {
    await runtime.close();
  }
}

export interface TestUser {
  id: string;
  email: string;
  password: string;
  key: string;
  keyId: string;
  auth: { authorization: string };
}

export interface TestApp {
  app: FastifyInstance;
  runtime: Runtime;
  config: Config;
  database: TestDatabase;
  inject(options: InjectOptions): Promise<LightMyRequestResponse>;
  /** A user (personal workspace included) with one API key. */
  user(options?: { plan?: Plan; rateLimit?: number; email?: string }): Promise<TestUser>;
  /** A user with one agent in their personal workspace. */
  userWithAgent(options?: { plan?: Plan; rateLimit?: number; agentName?: string }): Promise<TestUser & { agentId: string }>;
  /**
   * The process stopped and started again: closes this app (keeping its database) and returns a
   * new one over the same database and settings, which drops the database at its close if this
   * one would have. (On SQLite one server holds the file at a time, so a test of "the next
   * instance" restarts.) Closing this app afterwards does nothing.
   */
  restart(): Promise<TestApp>;
  /** Safe to call twice. */
  close(): Promise<void>;
}

export interface TestAppOptions {
  /** Over this database (several instances sharing one store on PostgreSQL, or a restart). */
  database?: TestDatabase;
  /** Drop the database at close: by default only one created here (else it is the caller's). */
  dropDatabaseAtClose?: boolean;
  /** Replaces the built-in agent's tool registry (tests of tools that need no permission, or that fail). */
  tools?: ToolRegistry;
  /** Receives the model-backed brain's warnings (tests of what a failed model call logs). */
  logWarning?: ModelWarning;
}

/** The URL the app listens on (listening on a free loopback port the first time). */
export async function listeningUrl(t: TestApp): Promise<string> {
  const address = t.app.server.address();
  if (address && typeof address === 'object') return `http://127.0.0.1:${address.port}`;
  return t.app.listen({ port: 0, host: '127.0.0.1' });
}

/** A real app over a fresh database, or over `options.database`. */
export async function startTestApp(overrides: Partial<Config> = {}, options: TestAppOptions = {}): Promise<TestApp> {
  const database = options.database ?? (await freshDatabase());
  const ownsDatabase = options.dropDatabaseAtClose ?? !options.database;
  const config = testConfig(database, overrides);
  const runtime = await createRuntime({
    config, storeOptions: database.pgSchema ? { pgSchema: database.pgSchema } : {}, tools: options.tools, logWarning: options.logWarning,
  });
  const app = await buildApp(runtime, { logger: false });
  await app.ready();
  await runtime.startEngine();
  const { services } = runtime;
  let closed = false;

  async function user(options: { plan?: Plan; rateLimit?: number; email?: string } = {}): Promise<TestUser> {
    const email = options.email ?? `u-${randomBase62(10).toLowerCase()}@example.test`;
    const password = `pw-${randomBase62(16)}`;
    const created = await services.accounts.createUser({ email, password, plan: options.plan ?? 'free' });
    const { key, token } = await services.keys.create(created.id, { label: 'test', rate_limit: options.rateLimit ?? 10_000 });
    return { id: created.id, email, password, key: token, keyId: key.key_id, auth: { authorization: `Bearer ${token}` } };
  }

  return {
    app,
    runtime,
    config,
    database,
    inject: (options) => app.inject(options),
    user,
    async userWithAgent(options = {}) {
      const u = await user(options);
      const agent = await services.agents.create(u.id, { agent_name: options.agentName ?? 'Test agent' });
      return { ...u, agentId: agent.agent_id };
    },
    restart,
    close,
  };

  async function close(dropDatabase = ownsDatabase) {
    if (closed) return;
    closed = true;
    await app.close();
    await runtime.close();
    if (dropDatabase) await database.drop();
  }

  async function restart(): Promise<TestApp> {
    await close(false);
    return startTestApp(overrides, { ...options, database, dropDatabaseAtClose: ownsDatabase });
  }
}

/** A test app of its own for the length of `use` (see startTestApp), closed whatever happens. */
export async function withTestApp<T>(
  use: (app: TestApp) => Promise<T>, overrides: Partial<Config> = {}, options: TestAppOptions = {},
): Promise<T> {
  const app = await startTestApp(overrides, options);
  try {
    return await use(app);
  } finally {
    await app.close();
  }
}

/** A problem body without its per-request id, so that two problems can be compared whole. */
export function withoutRequestId(body: Record<string, unknown>): Record<string, unknown> {
  const { request_id: _requestId, ...rest } = body;
  return rest;
}
