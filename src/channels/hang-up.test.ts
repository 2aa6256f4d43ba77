import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import Fastify from 'fastify';
import { hangUpSignal } from './hang-up.ts';

/** A real server whose one route reports the signal hangUpSignal gave it (the client gone first, with `before`). */
async function serverReporting(options: { before?: 'client hangs up' }) {
  const seen: Array<{ abortedAtOnce: boolean; abortedLater: Promise<boolean> }> = [];
  const app = Fastify();
  app.post('/wait', {
    // Stands for what runs before the handler (body, auth, rate limit) taking long enough for
    // the client to leave meanwhile.
    preHandler: async (request) => {
      if (options.before) await new Promise((resolve) => (request.raw.socket.destroyed ? resolve(null) : request.raw.socket.once('close', resolve)));
    },
  }, async (request, reply) => {
    const signal = hangUpSignal(request, reply);
    const abortedLater = new Promise<boolean>((resolve) => {
      signal.addEventListener('abort', () => resolve(true));
      setTimeout(() => resolve(signal.aborted), 300);
    });
    seen.push({ abortedAtOnce: signal.aborted, abortedLater });
    await abortedLater;
    return { ok: true };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, seen, port: (app.server.address() as AddressInfo).port };
}

function post(port: number) {
  const sending = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/wait', headers: { 'content-type': 'application/json' } });
  sending.on('error', () => {});
  sending.end('{}');
  return sending;
}

test('a client that hangs up while its answer is awaited aborts the signal', async () => {
  const { app, seen, port } = await serverReporting({});
  try {
    const sending = post(port);
    while (seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(seen[0]!.abortedAtOnce, false);
    sending.destroy();
    assert.equal(await seen[0]!.abortedLater, true);
  } finally {
    await app.close();
  }
});

test('a client that hung up before the handler ran aborts the signal at once', async () => {
  const { app, seen, port } = await serverReporting({ before: 'client hangs up' });
  try {
    const sending = post(port);
    await new Promise((resolve) => setTimeout(resolve, 50));
    sending.destroy();
    while (seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(seen[0]!.abortedAtOnce, true);
  } finally {
    await app.close();
  }
});

test('a client that stays for its answer never aborts the signal', async () => {
  const { app, seen, port } = await serverReporting({});
  try {
    const answer = await new Promise<string>((resolve, reject) => {
      post(port).on('response', (res) => {
        let body = '';
        res.on('data', (chunk) => { body += chunk; }).on('end', () => resolve(body)).on('error', reject);
      });
    });
    assert.equal(answer, '{"ok":true}');
    assert.equal(await seen[0]!.abortedLater, false);
  } finally {
    await app.close();
  }
});
