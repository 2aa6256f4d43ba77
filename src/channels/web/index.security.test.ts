import assert from 'node:assert/strict';
import { connect, type AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { buildApp } from '../../app.ts';
import { startTestApp, type TestApp } from '../../testing/harness.ts';
import { signedUpWithAgent, WebClient } from '../../testing/web-client.ts';

/** The web app's own scope (index.ts): its assets, its reading of queries, its forms' guard. */
let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('names every object has (constructor, __proto__, toString) are no assets: 404, never a 500 or a 304', async () => {
  const web = new WebClient(t);
  for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
    const res = await web.get(`/assets/${name}`, { 'if-none-match': '"x"' });
    assert.equal(res.statusCode, 404, name);
    assert.match(res.body, /There is no such file/);
  }
  assert.equal((await web.get('/assets/app.css')).statusCode, 200);
});

test('a query parameter sent twice counts by its first value, on every page (no 500)', async () => {
  const { web } = await signedUpWithAgent(t);
  const chat = await web.get('/chat?session=ses_a&session=ses_b');
  assert.equal(chat.statusCode, 404);
  assert.match(chat.body, /Conversation not found/);
  for (const url of ['/conversations?older=a&older=b', '/inbox?done=a&done=b', '/account/keys?revoked=a&revoked=b', '/agents?created=a&created=b', '/login?next=/a&next=/b']) {
    assert.ok((await web.get(url)).statusCode < 500, url);
  }
});

test('a log-in or sign-up whose client hangs up as it posts is dropped quietly: no error logged, nothing done', async () => {
  const lines: string[] = [];
  const app = await buildApp(t.runtime, { logger: { level: 'info', stream: { write: (line: string) => { lines.push(line); } } } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  try {
    const web = new WebClient(t);
    await web.get('/login');
    const email = 'hang-up@example.test';
    for (const path of ['/login', '/signup', '/login', '/signup']) {
      const body = new URLSearchParams({ _csrf: web.csrf, email, password: 'a long password' }).toString();
      await new Promise<void>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nCookie: ${web.cookieHeader()}\r\n`
            + `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
          socket.resetAndDestroy(); // at once: the request is whole, its client already gone
        });
        socket.on('close', () => resolve());
        socket.on('error', () => {});
      });
    }
    // A whole request after them, so that they have been dealt with by the time its line is in.
    const healthy = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(healthy.status, 200);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const logged = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
    assert.deepEqual(logged.filter((line) => line.level >= 50).map((line) => line.msg), []);
    assert.equal(await t.runtime.services.accounts.findByEmail(email), undefined, 'no account was made for a client that left');
  } finally {
    await app.close();
  }
});
