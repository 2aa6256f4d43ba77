import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { logAccess } from './access-log.ts';

test('an access line names the request id, method, path without its query, time and status, in that order', async () => {
  const lines: string[] = [];
  const app = Fastify({ logger: { level: 'info', stream: { write: (line: string) => { lines.push(line); } } }, disableRequestLogging: true });
  app.get('/things/:id', async (request, reply) => {
    logAccess(request, reply, 'before the answer');
    return {};
  });
  app.addHook('onResponse', (request, reply, done) => { logAccess(request, reply, 'request', reply.statusCode); done(); });
  try {
    await app.inject({ url: '/things/7?secret=query&b=2' });
    const [early, answered] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const { reqId } = answered!;
    assert.equal(typeof reqId, 'string');
    assert.deepEqual(Object.keys(answered!).slice(4), ['reqId', 'method', 'url', 'ms', 'status', 'msg']);
    assert.deepEqual({ ...answered, time: 0, pid: 0, hostname: '', ms: 0 },
      { level: 30, time: 0, pid: 0, hostname: '', reqId, method: 'GET', url: '/things/7', ms: 0, status: 200, msg: 'request' });
    assert.equal(early!.status, undefined, 'no status before an answer');
    assert.equal(early!.reqId, reqId);
    assert.ok(!lines.join('').includes('secret'), 'the query string is left out');
  } finally {
    await app.close();
  }
});
