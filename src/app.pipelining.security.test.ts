import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { MAX_PIPELINED_REQUESTS } from './app.ts';
import { API, startTestApp, type TestApp } from './testing/harness.ts';

/** HTTP/1.1 pipelining on a real socket: a client that never reads its answers cannot pile up work and memory. */
let t: TestApp;
let port: number;
before(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as { port: number }).port;
});
after(async () => { await t.close(); });

const openConnections = () => new Promise<number>((resolve, reject) =>
  t.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));

async function connected(): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  return socket;
}

test(`a connection that pipelines more than ${MAX_PIPELINED_REQUESTS} requests without reading the answers is closed, and the rest are not run`, { timeout: 30_000 }, async () => {
  const u = await t.userWithAgent({ rateLimit: 10_000 });
  const socket = await connected();
  socket.pause(); // never reads
  socket.on('error', () => {}); // the server's close may surface as a reset
  let requests = '';
  for (let i = 0; i < 1000; i++) {
    const body = JSON.stringify({ text: `pipelined ${i}`, agent_id: u.agentId });
    requests += `POST ${API}/messages HTTP/1.1\r\nHost: localhost\r\n${'Authorization'}: ${u.auth.authorization}\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  }
  socket.write(requests);
  for (let waited = 0; (await openConnections()) > 0; waited += 50) {
    assert.ok(waited < 20_000, 'the server closed the connection');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  socket.destroy();
  const taken = await t.runtime.store.db.selectFrom('turns').innerJoin('sessions', 'sessions.id', 'turns.session_id')
    .select('turns.id').where('sessions.user_id', '=', u.id).where('turns.role', '=', 'user').execute();
  assert.ok(taken.length <= MAX_PIPELINED_REQUESTS, `${taken.length} of the 1,000 messages were taken`);
  const after = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
  assert.equal(after.statusCode, 200, 'the server goes on');
});

test('a client that pipelines a few requests and reads the answers gets every one, in order', async () => {
  const socket = await connected();
  let received = '';
  socket.on('data', (chunk) => { received += chunk.toString('latin1'); });
  const count = 20;
  socket.write(Array.from({ length: count }, (_, i) => `GET /healthz?n=${i} HTTP/1.1\r\nHost: localhost\r\n\r\n`).join(''));
  for (let waited = 0; (received.match(/HTTP\/1\.1 200 OK/g) ?? []).length < count; waited += 20) {
    assert.ok(waited < 10_000, `answers so far: ${(received.match(/HTTP\/1\.1 /g) ?? []).length}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  socket.destroy();
  assert.equal((received.match(/HTTP\/1\.1 /g) ?? []).length, count, 'one answer each, no error among them');
});

test('the count is of answers not yet written, not of requests: a long keep-alive connection is never closed', async () => {
  const socket = await connected();
  let received = '';
  socket.on('data', (chunk) => { received += chunk.toString('latin1'); });
  const total = MAX_PIPELINED_REQUESTS * 4;
  for (let i = 1; i <= total; i++) {
    socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    while ((received.match(/HTTP\/1\.1 200 OK/g) ?? []).length < i) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  assert.equal(socket.destroyed, false);
  assert.equal(await openConnections(), 1);
  socket.destroy();
});
