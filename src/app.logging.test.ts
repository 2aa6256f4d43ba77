import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { databaseEnv, freshDatabase, type TestDatabase } from './testing/harness.ts';
import { startServerProcess, type ServerProcess } from './testing/server-process.ts';

/**
 * How the real server process writes its log (see logDestination in app.ts): in blocks, yet soon
 * when traffic is light, and never at the cost of serving when nothing reads its output.
 */
let database: TestDatabase;
let server: ServerProcess;

before(async () => {
  database = await freshDatabase();
  server = await startServerProcess(databaseEnv(database));
});
after(async () => {
  await server.kill('SIGTERM');
  await database.drop();
});

test('a quiet server writes a lone request\'s line soon, not only once a block of lines has filled', async () => {
  const res = await fetch(`${server.url}/healthz`);
  assert.equal(res.status, 200);
  const requestId = res.headers.get('x-request-id')!;
  const deadline = Date.now() + 5_000;
  while (!server.output().includes(requestId) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok(server.output().includes(requestId), 'the line is written while the server runs');
});

test('a log reader that stops reading does not stop the server from answering', async () => {
  // Nobody reads the pipe now: once its kernel buffer (64 KiB, a few hundred lines) is full,
  // a server that wrote its lines synchronously would block for good.
  server.child.stdout!.pause();
  try {
    for (let i = 0; i < 3000; i++) {
      const res = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(res.status, 200);
    }
  } finally {
    server.child.stdout!.resume();
  }
  // Once read again, the held lines arrive.
  const res = await fetch(`${server.url}/healthz`);
  const requestId = res.headers.get('x-request-id')!;
  const deadline = Date.now() + 10_000;
  while (!server.output().includes(requestId) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok(server.output().includes(requestId), 'the lines held while nobody read are written once the reader is back');
});
