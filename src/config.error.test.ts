/** Settings that cannot work stop the server before it opens anything, saying what to set. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig, settingsForLog } from './config.ts';

test('an unknown RATE_LIMIT_STORE is refused with the values it may take', () => {
  assert.throws(() => loadConfig({ RATE_LIMIT_STORE: 'bogus' }),
    /^Error: RATE_LIMIT_STORE must be one of "memory", "redis", "postgres", or unset to follow the database \(got "bogus"\)$/);
  for (const store of ['memory', 'redis']) assert.equal(loadConfig({ RATE_LIMIT_STORE: store }).rateLimitStore, store);
  assert.equal(loadConfig({}).rateLimitStore, 'auto');
});

test('RATE_LIMIT_STORE=postgres needs a PostgreSQL DATABASE_URL', () => {
  assert.throws(() => loadConfig({ RATE_LIMIT_STORE: 'postgres' }), /needs a PostgreSQL DATABASE_URL/);
  assert.equal(loadConfig({ RATE_LIMIT_STORE: 'postgres', DATABASE_URL: 'postgres://127.0.0.1/x' }).rateLimitStore, 'postgres');
});

test('a PostgreSQL DATABASE_URL that cannot be read as a URL is refused naming DATABASE_URL, without echoing it (it may hold a password)', () => {
  for (const bad of ['postgres://postgres:hunter2@[bad/x', 'postgres://postgres:hunter2@127.0.0.1:99999/x', 'postgresql://postgres:hunter2@exa mple/x']) {
    assert.throws(() => loadConfig({ DATABASE_URL: bad }),
      (error: Error) => /^DATABASE_URL must be sqlite:<path> or a PostgreSQL URL, such as postgres:\/\/.* \(it cannot be read as a URL\)$/.test(error.message)
        && !error.message.includes('hunter2'), bad);
  }
  assert.equal(loadConfig({ DATABASE_URL: 'postgresql://postgres:hunter2@127.0.0.1:5432/x?schema=mine' }).databaseUrl, 'postgresql://postgres:hunter2@127.0.0.1:5432/x?schema=mine');
});

test('SQLITE_SYNCHRONOUS is full unless set to normal; anything else is refused', () => {
  assert.equal(loadConfig({}).sqliteSynchronous, 'full');
  assert.equal(loadConfig({ SQLITE_SYNCHRONOUS: 'normal' }).sqliteSynchronous, 'normal');
  assert.equal(loadConfig({ SQLITE_SYNCHRONOUS: 'FULL' }).sqliteSynchronous, 'full');
  assert.throws(() => loadConfig({ SQLITE_SYNCHRONOUS: 'off' }), /^Error: SQLITE_SYNCHRONOUS must be "full" or "normal" \(got "off"\)$/);
});

test('TRUST_PROXY: false, the proxies\' addresses or ranges, or true; a count or anything else is refused', () => {
  assert.equal(loadConfig({}).trustProxy, false);
  assert.equal(loadConfig({ TRUST_PROXY: 'false' }).trustProxy, false);
  assert.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true);
  assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.5, 10.1.0.0/16,::1,fd00::/8,loopback' }).trustProxy,
    ['10.0.0.5', '10.1.0.0/16', '::1', 'fd00::/8', 'loopback']);
  assert.throws(() => loadConfig({ TRUST_PROXY: '1' }), /cannot tell a proxy from a client that connects directly; name the proxy/);
  for (const bad of ['yes', '10.0.0.0/33', 'proxy.example.test', '-1']) {
    assert.throws(() => loadConfig({ TRUST_PROXY: bad }), /^Error: TRUST_PROXY must be false, the proxies' addresses or ranges/, bad);
  }
});

test('PUBLIC_URL: a plain http(s) address, kept without its trailing slash; anything else is refused', () => {
  assert.equal(loadConfig({}).publicUrl, null);
  assert.equal(loadConfig({ PUBLIC_URL: 'https://agents.example.com/' }).publicUrl, 'https://agents.example.com');
  assert.equal(loadConfig({ PUBLIC_URL: ' http://example.com:8443/agents/ ' }).publicUrl, 'http://example.com:8443/agents');
  assert.throws(() => loadConfig({ PUBLIC_URL: 'ftp://example.com' }), /^Error: PUBLIC_URL must be the http:\/\/ or https:\/\/ address/);
  assert.throws(() => loadConfig({ PUBLIC_URL: 'example.com' }), /^Error: PUBLIC_URL must be .*it cannot be read as a URL/);
  for (const bad of ['https://user:secret@example.com', 'https://example.com/?a=1', 'https://example.com/#top']) {
    assert.throws(() => loadConfig({ PUBLIC_URL: bad }), /^Error: PUBLIC_URL must be a plain address/, bad);
  }
});

test('numbers are plain decimal integers: "1e3", "0x1F", " 80 " and "8.5" are refused, not read as something else', () => {
  for (const raw of ['1e3', '0x1F', ' 80 ', '8.5', '']) {
    if (raw === '') assert.equal(loadConfig({ PORT: raw }).port, 8080, 'empty is unset');
    else assert.throws(() => loadConfig({ PORT: raw }), new RegExp(`^Error: PORT must be an integer between 0 and 65535 \\(got "${raw.replace('.', '\\.')}"\\)$`));
  }
  assert.equal(loadConfig({ PORT: '8081' }).port, 8081);
});

test('LOG_LEVEL is one of pino\'s levels', () => {
  assert.equal(loadConfig({}).logLevel, 'info');
  assert.equal(loadConfig({ LOG_LEVEL: 'warn' }).logLevel, 'warn');
  assert.throws(() => loadConfig({ LOG_LEVEL: 'verbose' }), /^Error: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent \(got "verbose"\)$/);
});

test('REQUEST_TIMEOUT_MS: 60 s unless set, from 1 s to an hour', () => {
  assert.equal(loadConfig({}).requestTimeoutMs, 60_000);
  assert.equal(loadConfig({ REQUEST_TIMEOUT_MS: '5000' }).requestTimeoutMs, 5000);
  assert.throws(() => loadConfig({ REQUEST_TIMEOUT_MS: '10' }), /REQUEST_TIMEOUT_MS must be an integer between 1000 and 3600000/);
});

test('a key\'s default limit and the web chat\'s are bounded by MAX_RATE_LIMIT_PER_MINUTE, which the refusal names', () => {
  for (const name of ['DEFAULT_RATE_LIMIT_PER_MINUTE', 'WEB_CHAT_RATE_LIMIT_PER_MINUTE']) {
    assert.throws(() => loadConfig({ [name]: '20000' }),
      new RegExp(`^Error: ${name} must be an integer between 1 and 10000 \\(MAX_RATE_LIMIT_PER_MINUTE: raise it for more\\) \\(got "20000"\\)$`));
    assert.doesNotThrow(() => loadConfig({ [name]: '20000', MAX_RATE_LIMIT_PER_MINUTE: '20000' }));
  }
});

test('REDIS_URL, when Redis counts the rate limits, is a redis:// or rediss:// URL; the value is never echoed (it may hold a password)', () => {
  for (const bad of ['redis://127.0.0.1:6379x', 'notaurl', 'redis://:secret@127.0.0.1:port']) {
    assert.throws(() => loadConfig({ RATE_LIMIT_STORE: 'redis', REDIS_URL: bad }),
      /^Error: REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL, such as redis:\/\/127\.0\.0\.1:6379 or rediss:\/\/:password@host:6380\/0 \(it cannot be read as a URL\)$/, bad);
  }
  assert.throws(() => loadConfig({ RATE_LIMIT_STORE: 'redis', REDIS_URL: 'http://:secret@127.0.0.1:6379' }), /^Error: REDIS_URL must be .* \(got "http:…"\)$/);
  assert.throws(() => loadConfig({ RATE_LIMIT_STORE: 'redis', REDIS_URL: 'localhost:6379' }), /\(got "localhost:…"\)$/);
  for (const good of ['redis://127.0.0.1:6379', 'rediss://:pass@cache.example.test:6380/2', 'redis://user:pass@[::1]:6379']) {
    assert.equal(loadConfig({ RATE_LIMIT_STORE: 'redis', REDIS_URL: good }).redisUrl, good);
  }
  assert.equal(loadConfig({ RATE_LIMIT_STORE: 'redis' }).redisUrl, 'redis://127.0.0.1:6379');
  assert.equal(loadConfig({ REDIS_URL: 'notaurl' }).rateLimitStore, 'auto', 'not judged while Redis is not the rate limit store');
});

test('PG_POOL_SIZE is 10 unless set, from 2 to 1000', () => {
  assert.equal(loadConfig({}).pgPoolSize, 10);
  assert.equal(loadConfig({ PG_POOL_SIZE: '40' }).pgPoolSize, 40);
  for (const bad of ['1', '1001', 'ten']) assert.throws(() => loadConfig({ PG_POOL_SIZE: bad }), /PG_POOL_SIZE/);
});

test('the words of LOG_LEVEL, RATE_LIMIT_STORE and TRUST_PROXY (its named ranges too) are taken in any case, as SQLITE_SYNCHRONOUS is; a refusal quotes the value as written', () => {
  assert.equal(loadConfig({ LOG_LEVEL: 'INFO' }).logLevel, 'info');
  assert.equal(loadConfig({ LOG_LEVEL: 'Warn' }).logLevel, 'warn');
  assert.equal(loadConfig({ RATE_LIMIT_STORE: 'Memory' }).rateLimitStore, 'memory');
  assert.equal(loadConfig({ TRUST_PROXY: 'FALSE' }).trustProxy, false);
  assert.equal(loadConfig({ TRUST_PROXY: 'True' }).trustProxy, true);
  assert.deepEqual(loadConfig({ TRUST_PROXY: 'Loopback, 10.0.0.5,UniqueLocal' }).trustProxy, ['loopback', '10.0.0.5', 'uniquelocal']);
  assert.throws(() => loadConfig({ LOG_LEVEL: 'LOUD' }), /\(got "LOUD"\)$/);
  assert.throws(() => loadConfig({ RATE_LIMIT_STORE: 'Bogus' }), /\(got "Bogus"\)$/);
});

test('MODEL_PROVIDER unset: the built-in agent, whatever the other MODEL_* say', () => {
  assert.equal(loadConfig({}).model, null);
  assert.equal(loadConfig({ MODEL_PROVIDER: '', MODEL_NAME: 'x', MODEL_BASE_URL: 'notaurl' }).model, null);
});

test('MODEL_PROVIDER openai-compatible or anthropic, with MODEL_NAME; MODEL_TIMEOUT_MS, MODEL_HISTORY_CHARACTERS and MODEL_MAX_OUTPUT_TOKENS bounded; MODEL_BASE_URL needed for openai-compatible', () => {
  assert.deepEqual(loadConfig({ MODEL_PROVIDER: 'openai-compatible', MODEL_NAME: 'llama3.2', MODEL_BASE_URL: 'http://127.0.0.1:11434/v1/' }).model, {
    provider: 'openai-compatible', name: 'llama3.2', baseUrl: 'http://127.0.0.1:11434/v1', apiKey: null, timeoutMs: 120_000, systemPrompt: null,
    historyCharacters: 32_000, maxOutputTokens: null,
  });
  assert.deepEqual(loadConfig({
    MODEL_PROVIDER: 'Anthropic', MODEL_NAME: 'claude-x', MODEL_API_KEY: 'sk-a', MODEL_TIMEOUT_MS: '30000', MODEL_SYSTEM_PROMPT: 'Be kind.',
    MODEL_HISTORY_CHARACTERS: '0', MODEL_MAX_OUTPUT_TOKENS: '4096',
  }).model, {
    provider: 'anthropic', name: 'claude-x', baseUrl: null, apiKey: 'sk-a', timeoutMs: 30_000, systemPrompt: 'Be kind.', historyCharacters: 0, maxOutputTokens: 4096,
  });
  assert.throws(() => loadConfig({ MODEL_PROVIDER: 'anthropic', MODEL_NAME: 'c', MODEL_HISTORY_CHARACTERS: '-1' }), /^Error: MODEL_HISTORY_CHARACTERS must be an integer between 0 and 10000000 \(got "-1"\)$/);
  assert.throws(() => loadConfig({ MODEL_PROVIDER: 'anthropic', MODEL_NAME: 'c', MODEL_MAX_OUTPUT_TOKENS: '0' }), /^Error: MODEL_MAX_OUTPUT_TOKENS must be an integer between 1 and 1000000 \(got "0"\)$/);
  assert.throws(() => loadConfig({ MODEL_PROVIDER: 'anthropic', MODEL_NAME: 'c', MODEL_TIMEOUT_MS: '999' }), /^Error: MODEL_TIMEOUT_MS must be an integer between 1000 and 600000 \(got "999"\)$/);
});

test('a model setting that cannot work is refused with what to set, never echoing MODEL_API_KEY or MODEL_BASE_URL', () => {
  const secret = 'sk-never-echo-9f8e7d';
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ MODEL_PROVIDER: 'openai' }, /^Error: MODEL_PROVIDER must be "openai-compatible" or "anthropic", or unset for the built-in agent \(got "openai"\)$/],
    [{ MODEL_PROVIDER: 'anthropic' }, /^Error: MODEL_NAME is required with MODEL_PROVIDER=anthropic: the model to call, such as /],
    [{ MODEL_PROVIDER: 'openai-compatible', MODEL_NAME: 'm' }, /^Error: MODEL_BASE_URL is required with MODEL_PROVIDER=openai-compatible: .*http:\/\/127\.0\.0\.1:11434\/v1 \(Ollama\)/],
    [{ MODEL_PROVIDER: 'openai-compatible', MODEL_NAME: 'm', MODEL_BASE_URL: `localhost:11434/${secret}` }, /^Error: MODEL_BASE_URL must be an http:\/\/ or https:\/\/ URL, .* \(got "localhost:…"\)$/],
    [{ MODEL_PROVIDER: 'anthropic', MODEL_NAME: 'm', MODEL_BASE_URL: `http://u:${secret}@[bad/v1` }, /^Error: MODEL_BASE_URL must be an http:\/\/ or https:\/\/ URL, .* \(it cannot be read as a URL\)$/],
    // fetch refuses a URL with credentials: every call would fail, and the start-up line would show the user name.
    [{ MODEL_PROVIDER: 'openai-compatible', MODEL_NAME: 'm', MODEL_BASE_URL: `https://${secret}@api.example.test/v1` }, /^Error: MODEL_BASE_URL must not hold a user name or password: the key goes in MODEL_API_KEY$/],
    [{ MODEL_PROVIDER: 'anthropic', MODEL_NAME: 'm', MODEL_BASE_URL: `https://u:${secret}@api.example.test/v1` }, /^Error: MODEL_BASE_URL must not hold a user name or password: the key goes in MODEL_API_KEY$/],
  ];
  for (const [env, refusal] of cases) {
    assert.throws(() => loadConfig({ ...env, MODEL_API_KEY: secret }), (error: Error) => {
      assert.match(String(error), refusal);
      assert.ok(!error.message.includes(secret), error.message);
      return true;
    }, JSON.stringify(env));
  }
  // A key no header can carry (a line break, a character past Latin-1) failed every call unsent.
  for (const key of [`${secret}\nx`, `${secret}\u2028`, `${secret}€`]) {
    assert.throws(() => loadConfig({ MODEL_PROVIDER: 'anthropic', MODEL_NAME: 'm', MODEL_API_KEY: key }), (error: Error) => {
      assert.match(String(error), /^Error: MODEL_API_KEY must be one line of printable characters/);
      assert.ok(!error.message.includes(secret), error.message);
      return true;
    });
  }
  assert.equal(loadConfig({ MODEL_PROVIDER: 'anthropic', MODEL_NAME: 'm', MODEL_API_KEY: 'sk-ant-api03-Ab_c-9' }).model?.apiKey, 'sk-ant-api03-Ab_c-9');
});

test('EVENT_RETENTION_HOURS: a week unless set, from 1 hour to a year; anything else is refused', () => {
  assert.equal(loadConfig({}).eventRetentionMs, 168 * 3_600_000);
  assert.equal(loadConfig({ EVENT_RETENTION_HOURS: '1' }).eventRetentionMs, 3_600_000);
  assert.equal(loadConfig({ EVENT_RETENTION_HOURS: '8760' }).eventRetentionMs, 8760 * 3_600_000);
  for (const bad of ['0', '8761', '-1', '1.5', '24h', 'a week']) {
    assert.throws(() => loadConfig({ EVENT_RETENTION_HOURS: bad }),
      new RegExp(`^Error: EVENT_RETENTION_HOURS must be an integer between 1 and 8760 \\(got "${bad.replace('.', '\\.')}"\\)$`), bad);
  }
});

test('WEBHOOK_RETRY_SCHEDULE: 5s,30s,2m,10m,1h,3h,6h,12h unless set; 1 to 20 pauses in ms, s, m or h of at most a day; anything else is refused', () => {
  assert.deepEqual(loadConfig({}).webhookRetryScheduleMs, [5_000, 30_000, 120_000, 600_000, 3_600_000, 10_800_000, 21_600_000, 43_200_000]);
  assert.deepEqual(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '50ms, 1s,2m,24h' }).webhookRetryScheduleMs, [50, 1_000, 120_000, 86_400_000]);
  for (const bad of ['5', '5 s', '0s', '25h', '5s,,5s', '-1s', '1d', Array(21).fill('1s').join(',')]) {
    assert.throws(() => loadConfig({ WEBHOOK_RETRY_SCHEDULE: bad }), /^Error: WEBHOOK_RETRY_SCHEDULE must be 1 to 20 comma-separated pauses such as 5s,30s,2m,10m,1h,3h,6h,12h \(units ms, s, m, h; each at most 24h\)/, bad);
  }
});

test('WEBHOOK_ALLOW_PRIVATE_URLS: false unless set to true; anything else is refused', () => {
  assert.equal(loadConfig({}).webhookAllowPrivateUrls, false);
  assert.equal(loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: 'TRUE' }).webhookAllowPrivateUrls, true);
  assert.equal(loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: 'false' }).webhookAllowPrivateUrls, false);
  for (const bad of ['yes', '1', 'on']) {
    assert.throws(() => loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: bad }), new RegExp(`^Error: WEBHOOK_ALLOW_PRIVATE_URLS must be true or false \\(got "${bad}"\\)$`));
  }
});

test('LISTEN_BACKLOG: 4096 unless set, from 1 up; RUNNER_CONCURRENCY: 10000 unless set, up to a million', () => {
  assert.equal(loadConfig({}).listenBacklog, 4096);
  assert.equal(loadConfig({ LISTEN_BACKLOG: '65535' }).listenBacklog, 65535);
  assert.throws(() => loadConfig({ LISTEN_BACKLOG: '0' }), /^Error: LISTEN_BACKLOG must be an integer between 1 and 1000000 \(got "0"\)$/);
  assert.equal(loadConfig({}).runnerConcurrency, 10_000);
  assert.equal(loadConfig({ RUNNER_CONCURRENCY: '256' }).runnerConcurrency, 256);
  assert.throws(() => loadConfig({ RUNNER_CONCURRENCY: '0' }), /^Error: RUNNER_CONCURRENCY must be an integer between 1 and 1000000 \(got "0"\)$/);
});

test('TELEGRAM_*: off without a token; a malformed token, API root, secret or lease is refused naming the setting, never echoing the token', () => {
  assert.equal(loadConfig({}).telegram, null);
  const token = '123456789:AAEabcdefghijklmnopqrstuvwxyz012345';
  const on = loadConfig({ TELEGRAM_BOT_TOKEN: token, TELEGRAM_API_ROOT: 'http://127.0.0.1:8081/' });
  assert.equal(on.telegram?.apiRoot, 'http://127.0.0.1:8081');
  assert.equal(on.telegram?.webhookUrl, null);
  assert.equal(on.telegram?.leaseMs, 15_000);
  assert.ok(!JSON.stringify(settingsForLog(on)).includes(token));
  const bad = 'not-a-token-secret-value';
  assert.throws(() => loadConfig({ TELEGRAM_BOT_TOKEN: bad }), (error: Error) => /^TELEGRAM_BOT_TOKEN must be/.test(error.message) && !error.message.includes(bad));
  assert.throws(() => loadConfig({ TELEGRAM_BOT_TOKEN: token, TELEGRAM_API_ROOT: 'ftp://x' }), /^Error: TELEGRAM_API_ROOT must be/);
  assert.throws(() => loadConfig({ TELEGRAM_BOT_TOKEN: token, TELEGRAM_WEBHOOK_SECRET: 'short' }), /^Error: TELEGRAM_WEBHOOK_SECRET must be/);
  assert.throws(() => loadConfig({ TELEGRAM_BOT_TOKEN: token, TELEGRAM_LEASE_MS: '10' }), /^Error: TELEGRAM_LEASE_MS must be an integer between 1000 and 600000/);
});
