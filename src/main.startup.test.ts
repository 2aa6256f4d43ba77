import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { databaseEnv, freshDatabase, TEST_DB } from './testing/harness.ts';
import { startServerProcess } from './testing/server-process.ts';

const release = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

test('the server says at start which release it is and where its data goes, with no secret in the line', { timeout: 60_000 }, async () => {
  const database = await freshDatabase();
  const env = databaseEnv(database);
  // PostgreSQL here trusts local connections, so a password in the URL is accepted and unused:
  // it must not be printed all the same.
  if (TEST_DB === 'postgres') env.DATABASE_URL = env.DATABASE_URL!.replace('postgres://postgres@', 'postgres://postgres:start-line-s3cret@');
  const server = await startServerProcess({ ...env, WAIT_CEILING_MS: '7000', INSTANCE_ID: 'startup-test' });
  try {
    // The line comes once the engine runs, after "Server listening": wait for it.
    for (let i = 0; i < 100 && !server.output().includes(' serving"'); i++) await new Promise((r) => setTimeout(r, 50));
  } finally {
    await server.kill('SIGTERM');
  }
  const line = server.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.msg === `agent-channel ${release} serving`);
  assert.ok(line, `no start-up line in:\n${server.output()}`);
  assert.equal(line.release, release);
  assert.equal(line.node, process.versions.node);
  assert.equal(line.waitCeilingMs, 7000);
  assert.equal(line.instanceId, 'startup-test');
  assert.equal(line.listenBacklog, 4096);
  assert.equal(line.agents, 'built-in');
  if (TEST_DB === 'postgres') {
    assert.match(String(line.database), /^postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:5432\/test\?schema=t_/);
    assert.equal(line.rateLimitStore, 'postgres');
  } else {
    assert.equal(line.database, `sqlite:${resolve(database.url.slice('sqlite:'.length))}`);
    assert.equal(line.rateLimitStore, 'memory');
  }
  assert.ok(!server.output().includes('start-line-s3cret'));
  await database.drop();
});

test('LISTEN_BACKLOG reaches the listening socket: its queue of connections not yet accepted', { timeout: 60_000 }, async () => {
  const database = await freshDatabase();
  const server = await startServerProcess({ ...databaseEnv(database), LISTEN_BACKLOG: '1234' });
  try {
    // For a listening socket, ss shows the backlog as its Send-Q (the kernel caps it at net.core.somaxconn).
    const listening = spawnSync('ss', ['-Hltn', `sport = :${new URL(server.url).port}`], { encoding: 'utf8' });
    assert.equal(listening.status, 0, listening.stderr);
    const sendQ = Number(listening.stdout.trim().split(/\s+/)[2]);
    const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
    assert.equal(sendQ, Math.min(1234, somaxconn), listening.stdout);
  } finally {
    await server.kill('SIGTERM');
  }
  await database.drop();
});
