import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { CLI_PATH, runCli } from '../testing/cli.ts';
import { API, childEnv, databaseEnv, freshDatabase, type TestDatabase } from '../testing/harness.ts';
import { startServerProcess } from '../testing/server-process.ts';
import { Redis } from 'ioredis';
import { parseApiKey } from '../domain/api-key.ts';
import { redisAnswers, TEST_REDIS_URL } from '../testing/redis.ts';

/**
 * `agent-channel serve` as a real child process, with the operator CLI changing the same
 * database while it runs; its JSON log output is captured whole.
 */
let database: TestDatabase;
let env: Record<string, string>;
let server: ChildProcess;
let baseUrl: string;
let logs = '';

before(async () => {
  database = await freshDatabase();
  env = { ...databaseEnv(database), SCRYPT_COST_LOG2: '10' };
  server = spawn(process.execPath, [CLI_PATH, 'serve'], {
    env: { ...childEnv(), ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'debug' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server.stdout!.setEncoding('utf8').on('data', (chunk: string) => { logs += chunk; });
  server.stderr!.setEncoding('utf8').on('data', (chunk: string) => { logs += chunk; });
  baseUrl = await new Promise<string>((resolve, reject) => {
    const watch = () => {
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(logs);
      if (match) { server.stdout!.off('data', watch); resolve(match[1]!); }
    };
    server.stdout!.on('data', watch);
    server.once('exit', (code) => reject(new Error(`server exited with ${code}: ${logs}`)));
  });
});

after(async () => {
  if (server.exitCode === null) {
    await new Promise((resolve) => { server.once('exit', resolve); server.kill('SIGTERM'); });
  }
  await database.drop();
});

async function cli(...args: string[]): Promise<string> {
  const result = await runCli(env, ...args);
  assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
  return result.stdout.trim();
}

const listAgents = (key: string) => fetch(`${baseUrl}${API}/agents`, { headers: { authorization: `Bearer ${key}` } });

let key = '';

test('the CLI works against the database while the server runs, and the server sees its changes at once', async () => {
  await cli('users', 'create', '--email', 'live@example.test', '--password', 'correct horse');
  const agentId = await cli('agents', 'create', '--email', 'live@example.test', '--name', 'Live agent');
  key = await cli('keys', 'create', '--email', 'live@example.test', '--label', 'live');
  const keyId = key.split('_')[1]!;

  const listed = await listAgents(key);
  assert.equal(listed.status, 200);
  assert.deepEqual((await listed.json() as { agents: Array<{ agent_id: string }> }).agents.map((a) => a.agent_id), [agentId]);

  // The server keeps what it read of keys and agents while no process has written to them; a
  // membership the CLI adds shows at once.
  await cli('users', 'create', '--email', 'other@example.test', '--password', 'correct horse');
  const otherAgentId = await cli('agents', 'create', '--email', 'other@example.test', '--name', 'Other agent');
  const otherKey = await cli('keys', 'create', '--email', 'other@example.test', '--label', 'other');
  const [otherAgent] = (await (await listAgents(otherKey)).json() as { agents: Array<{ workspace_id: string }> }).agents;
  // Read (and so cached) again after the other user's commits: only the membership's own commit
  // can make the next list differ.
  assert.deepEqual((await (await listAgents(key)).json() as { agents: Array<{ agent_id: string }> }).agents.map((a) => a.agent_id), [agentId]);
  await cli('workspaces', 'add-member', '--workspace', otherAgent!.workspace_id, '--email', 'live@example.test', '--role', 'member');
  assert.deepEqual((await (await listAgents(key)).json() as { agents: Array<{ agent_id: string }> }).agents.map((a) => a.agent_id),
    [agentId, otherAgentId]);

  await cli('keys', 'disable', '--key-id', keyId);
  assert.equal((await listAgents(key)).status, 401);
  await cli('keys', 'enable', '--key-id', keyId);
  assert.equal((await listAgents(key)).status, 200);
  await cli('keys', 'revoke', '--email', 'live@example.test', '--key-id', keyId);
  assert.equal((await listAgents(key)).status, 401, 'revoked by another process: refused on the very next request');
});

test('the server logs each request with its id, and never the Authorization header or a secret', async () => {
  assert.ok(key, 'the previous test made a key');
  const wrong = `${key.slice(0, -4)}ABCD`;
  const res = await fetch(`${baseUrl}${API}/agents`, { headers: { authorization: `Bearer ${wrong}`, cookie: 'session=top-secret-cookie' } });
  assert.equal(res.status, 401);
  const requestId = res.headers.get('x-request-id')!;
  await new Promise((resolve) => { server.once('exit', resolve); server.kill('SIGTERM'); }); // flushes the log

  const lines = logs.trim().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.ok(lines.some((line) => line.reqId === requestId), 'the request id is in the log');
  const secret = key.split('_')[2]!;
  for (const needle of [secret, wrong.split('_')[2]!, 'Bearer ak_', 'top-secret-cookie']) {
    assert.ok(!logs.includes(needle), `the log must not contain ${needle.slice(0, 12)}…`);
  }
});

test('Redis out of reach from the start is logged, naming Redis, even though it fails before the server has listened', { timeout: 60_000 }, async () => {
  const own = await freshDatabase();
  after(() => own.drop());
  // Nothing listens on port 1: the first connection attempt fails while the app is still being built.
  const redisless = await startServerProcess({ ...databaseEnv(own), RATE_LIMIT_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:1' });
  try {
    const deadline = Date.now() + 10_000;
    while (!/"msg":"the rate limit store \(Redis, at REDIS_URL\) cannot be reached/.test(redisless.output()) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const lines = redisless.output().split('\n').filter((line) => line.includes('Redis'));
    assert.equal(lines.length, 1, `one line, once per outage:\n${redisless.output()}`);
    assert.match(lines[0]!, /"level":50.*"err":\{.*ECONNREFUSED 127\.0\.0\.1:1/);

    // Meanwhile each API request is a 503 with one brief warn line: no stack for each of them.
    const ownEnv = { ...databaseEnv(own), SCRYPT_COST_LOG2: '10' };
    assert.equal((await runCli(ownEnv, 'users', 'create', '--email', 'redisless@example.test', '--password', 'correct horse')).code, 0);
    const created = await runCli(ownEnv, 'keys', 'create', '--email', 'redisless@example.test', '--label', 'redisless');
    const res = await fetch(`${redisless.url}${API}/agents`, { headers: { authorization: `Bearer ${created.stdout.trim()}` } });
    assert.equal(res.status, 503);
    const requestId = res.headers.get('x-request-id')!;
    const warned = () => redisless.output().split('\n').find((line) => line.includes(requestId) && line.includes('rate limit store unavailable'));
    while (!warned() && Date.now() < deadline + 10_000) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.match(warned() ?? '', /"level":40/, `a warn line for the request:\n${redisless.output()}`);
    assert.doesNotMatch(warned()!, /"stack"/);
  } finally {
    await redisless.kill('SIGTERM');
  }
});

test('a rate limit check that fails for a reason of ours (Redis answers with an error) is an error line with its stack, not an outage\'s brief warning; still a 503', { timeout: 60_000 }, async (t) => {
  if (!await redisAnswers()) return t.skip(`no Redis at ${TEST_REDIS_URL}`);
  const own = await freshDatabase();
  after(() => own.drop());
  const ownEnv = { ...databaseEnv(own), SCRYPT_COST_LOG2: '10' };
  assert.equal((await runCli(ownEnv, 'users', 'create', '--email', 'wrongtype@example.test', '--password', 'correct horse')).code, 0);
  const key = (await runCli(ownEnv, 'keys', 'create', '--email', 'wrongtype@example.test', '--label', 'wrongtype')).stdout.trim();
  const { keyId } = parseApiKey(key)!;
  // The key's log in Redis holds a value of the wrong type: the limiter's script gets WRONGTYPE back.
  const redis = new Redis(TEST_REDIS_URL);
  const runs = `agent-channel:rl:{${keyId}}:runs`;
  await redis.set(runs, 'not a sorted set');
  const server = await startServerProcess({ ...ownEnv, RATE_LIMIT_STORE: 'redis', REDIS_URL: TEST_REDIS_URL });
  try {
    const res = await fetch(`${server.url}${API}/agents`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 503);
    const requestId = res.headers.get('x-request-id')!;
    const deadline = Date.now() + 10_000;
    const line = () => server.output().split('\n').find((l) => l.includes(requestId) && l.includes('rate limit'));
    while (!line() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.match(line() ?? '', /"level":50[^\n]*"err":\{[^\n]*WRONGTYPE[^\n]*"stack"[^\n]*"msg":"rate limit check failed"/, server.output());
  } finally {
    await server.kill('SIGTERM');
    await redis.del(runs);
    redis.disconnect();
  }
});
