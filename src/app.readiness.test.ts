import assert from 'node:assert/strict';
import { test } from 'node:test';
import { API, startTestApp } from './testing/harness.ts';
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
