import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { API, databaseEnv, freshDatabase, seedAccount, type TestDatabase } from './testing/harness.ts';
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

test('a client that hangs up while waiting for its reply gets a log line of its own, at once', async () => {
  const { key } = await seedAccount(database, 'hang-up@example.test', 1);
  const body = JSON.stringify({ text: '!sleep 5000' });
  const { hostname, port } = new URL(server.url);
  const sending = httpRequest({
    host: hostname, port, method: 'POST', path: `${API}/messages`,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
  });
  sending.on('error', () => {}); // the hang-up below
  sending.end(body);
  const awaitingReply = async () => Number(/^requests_awaiting_reply (\d+)$/m.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1]);
  for (let waited = 0; (await awaitingReply()) !== 1; waited += 20) {
    assert.ok(waited < 5_000, 'the request waits for its turn');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  sending.destroy();
  const hungUp = () => server.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line))
    .find((line) => line.msg === 'request: the client hung up before its answer');
  const deadline = Date.now() + 3_000; // the turn sleeps 5 s: the line comes from the hang-up, not the turn's end
  while (!hungUp() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  const line = hungUp();
  assert.ok(line, 'the hang-up is logged');
  assert.equal(line.method, 'POST');
  assert.equal(line.url, `${API}/messages`);
  assert.match(line.reqId, /^[0-9a-f-]{36}$/);
  assert.ok(!server.output().includes(key.split('_')[2]!), 'no secret in the log');
});

test('a request the HTTP parser refuses (no route sees it) gets a log line too, found by the id it was answered with', async () => {
  const { hostname, port } = new URL(server.url);
  const answer = await new Promise<string>((resolve, reject) => {
    let received = '';
    const socket = connect(Number(port), hostname, () => socket.write(`POST ${API}/messages HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n`));
    socket.on('data', (chunk) => { received += chunk; }).on('close', () => resolve(received)).on('error', reject);
  });
  assert.match(answer, /^HTTP\/1\.1 400 /);
  const requestId = /^X-Request-Id: (\S+)\r$/m.exec(answer)?.[1];
  assert.ok(requestId, answer);
  const deadline = Date.now() + 5_000;
  const lineOf = () => server.output().split('\n').find((l) => l.includes(requestId));
  while (!lineOf() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  const line = JSON.parse(lineOf() ?? 'null');
  assert.ok(line, 'a line names the request');
  assert.equal(line.level, 30, 'at info, where the access log is');
  assert.equal(line.status, 400);
  assert.equal(line.code, 'HPE_INVALID_CONTENT_LENGTH');
  assert.equal(line.msg, 'request refused by the HTTP parser');
});
