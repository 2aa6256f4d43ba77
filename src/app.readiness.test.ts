import assert from 'node:assert/strict';
import { test } from 'node:test';
import { proxyInFrontOf } from './testing/frozen-database.ts';
import { API, freshDatabase, startTestApp, TEST_DB } from './testing/harness.ts';
import { redisAnswers, TEST_REDIS_URL } from './testing/redis.ts';

/** /readyz says whether an API request can be served: the database and the rate limit store. */

test('/readyz: 503 "rate limit store unreachable" while the Redis rate limit store is down, as API requests get 503', async () => {
  const down = await startTestApp({ rateLimitStore: 'redis', redisUrl: 'redis://127.0.0.1:1' });
  try {
    const startedAt = Date.now();
    const res = await down.inject({ method: 'GET', url: '/readyz' });
    assert.equal(res.statusCode, 503, res.body);
    assert.deepEqual(res.json(), { status: 'unavailable', reason: 'rate limit store unreachable' });
    assert.ok(Date.now() - startedAt < 5_000, 'answered within the limiter\'s timeouts, not after endless retries');
    assert.equal((await down.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process itself is up');
  } finally {
    await down.close();
  }
});

test('/readyz: ready with a Redis rate limit store that answers', { skip: !(await redisAnswers()) && 'no Redis at REDIS_URL' }, async () => {
  const up = await startTestApp({ rateLimitStore: 'redis', redisUrl: TEST_REDIS_URL });
  try {
    const res = await up.inject({ method: 'GET', url: '/readyz' });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { status: 'ready' });
    const u = await up.user();
    assert.equal((await up.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth })).statusCode, 200);
  } finally {
    await up.close();
  }
});

/** `work`, or a failure naming `what` if it has not settled within `ms` (a bound on a wait, not a speed test). */
async function settledWithin<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms); });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

test('/readyz: 503 "database unreachable" at once while the database accepts connections but stops answering; ready again when it answers', { skip: TEST_DB !== 'postgres' && 'PostgreSQL pass only', timeout: 60_000 }, async () => {
  const database = await freshDatabase();
  const { proxy, url } = await proxyInFrontOf(database.url);
  const app = await startTestApp({}, { database: { ...database, url }, dropDatabaseAtClose: true });
  try {
    assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    proxy.freeze();
    const res = await settledWithin(app.inject({ method: 'GET', url: '/readyz' }), 5_000, '/readyz on a frozen database');
    assert.equal(res.statusCode, 503, res.body);
    assert.deepEqual(res.json(), { status: 'unavailable', reason: 'database unreachable' });
    proxy.thaw();
    assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  } finally {
    proxy.thaw();
    await app.close();
    await proxy.close();
  }
});
