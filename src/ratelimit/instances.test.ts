import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { redisAnswers, TEST_REDIS_URL } from '../testing/redis.ts';
import type { Config } from '../config.ts';
import { API, freshDatabase, startTestApp, TEST_DB, type TestApp, withTestApp } from '../testing/harness.ts';
import { MemoryRateLimiter } from './memory.ts';
import { PostgresRateLimiter } from './postgres.ts';
import { RedisRateLimiter } from './redis.ts';

/**
 * The limiter an app gets, and several apps (instances) over one PostgreSQL sharing one key's
 * quota through the real HTTP surface (auth hook, headers, 429).
 */
const onPostgres = TEST_DB === 'postgres' ? false : 'several instances need PostgreSQL (the PostgreSQL pass)';


test('unset, the limiter follows the database; memory stays selectable', async () => {
  await withTestApp(async (t) => {
    assert.ok(t.runtime.rateLimiter instanceof (TEST_DB === 'postgres' ? PostgresRateLimiter : MemoryRateLimiter));
  });
  await withTestApp(async (m) => {
    assert.ok(m.runtime.rateLimiter instanceof MemoryRateLimiter);
  }, { rateLimitStore: 'memory' });
});

/** Two apps over one fresh database with `overrides`; one user of limit L made on the first. */
async function twoInstances(overrides: Partial<Config>, limit: number, run: (apps: TestApp[], auth: { authorization: string }, keyId: string) => Promise<void>) {
  const database = await freshDatabase();
  const apps: TestApp[] = [];
  try {
    apps.push(await startTestApp({ ...overrides, instanceId: 'instance-a' }, { database }));
    apps.push(await startTestApp({ ...overrides, instanceId: 'instance-b' }, { database }));
    const u = await apps[0]!.user({ rateLimit: limit });
    await run(apps, u.auth, u.keyId);
  } finally {
    for (const app of apps) await app.close();
    await database.drop();
  }
}

async function alternating(apps: TestApp[], auth: { authorization: string }, count: number) {
  const responses = [];
  for (let i = 0; i < count; i++) responses.push(await apps[i % apps.length]!.inject({ method: 'GET', url: `${API}/agents`, headers: auth }));
  return responses;
}

for (const store of ['auto', 'redis'] as const) {
  const name = store === 'auto' ? 'the default (PostgreSQL) limiter' : 'the Redis limiter';
  test(`two instances with ${name}: one key, requests alternating between them, at most L accepted`, { skip: onPostgres }, async (t) => {
    if (store === 'redis' && !(await redisAnswers())) {
      if (process.env.CI === 'true') throw new Error(`Redis does not answer at ${TEST_REDIS_URL}`);
      t.skip(`Redis does not answer at ${TEST_REDIS_URL}`);
      return;
    }
    const limit = 10;
    await twoInstances({ rateLimitStore: store, redisUrl: TEST_REDIS_URL }, limit, async (apps, auth, keyId) => {
      try {
        const responses = await alternating(apps, auth, 3 * limit);
        assert.deepEqual(responses.map((r) => r.statusCode), [...Array(limit).fill(200), ...Array(2 * limit).fill(429)]);
        responses.forEach((res, i) => {
          assert.equal(res.headers['ratelimit-policy'], `"key";q=${limit};w=60`);
          if (i < limit) {
            assert.match(String(res.headers['ratelimit']), new RegExp(`^"key";r=${limit - i - 1};t=\\d+$`));
          } else {
            const retryAfter = Number(res.headers['retry-after']);
            assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${res.headers['retry-after']}`);
            assert.equal(res.headers['ratelimit'], `"key";r=0;t=${retryAfter}`);
          }
        });
        // At once, from both: still nothing more.
        const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => apps[i % 2]!.inject({ method: 'GET', url: `${API}/agents`, headers: auth })));
        assert.ok(burst.every((r) => r.statusCode === 429));
      } finally {
        const limiter = apps[0]!.runtime.rateLimiter;
        if (limiter instanceof RedisRateLimiter) {
          const admin = new Redis(TEST_REDIS_URL);
          await admin.del(...Object.values(limiter.keysOf(keyId)));
          admin.disconnect();
        }
      }
    });
  });
}

test('two instances sharing a fresh key at once: exactly L accepted', { skip: onPostgres }, async () => {
  const limit = 15;
  await twoInstances({}, limit, async (apps, auth) => {
    const responses = await Promise.all(Array.from({ length: 60 }, (_, i) => apps[i % 2]!.inject({ method: 'GET', url: `${API}/agents`, headers: auth })));
    assert.equal(responses.filter((r) => r.statusCode === 200).length, limit);
    assert.equal(responses.filter((r) => r.statusCode === 429).length, 60 - limit);
  });
});

test('RATE_LIMIT_STORE=memory on several instances multiplies the limit (as documented)', { skip: onPostgres }, async () => {
  const limit = 4;
  await twoInstances({ rateLimitStore: 'memory' }, limit, async (apps, auth) => {
    const responses = await alternating(apps, auth, 4 * limit);
    assert.equal(responses.filter((r) => r.statusCode === 200).length, 2 * limit);
  });
});
