import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, type TestApp } from '../../testing/harness.ts';
import { WebClient } from './web-client.test-helper.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ webSessionIdleMinutes: 30 }); });
after(async () => { await t.close(); });

test('a session idle for longer than the timeout is over', async () => {
  const web = new WebClient(t);
  await web.signup();
  const token = web.cookies.get('ac_session')!;
  assert.equal((await web.get('/account/keys')).statusCode, 200);
  // 29 minutes idle: still signed in (and the visit counts as activity).
  await t.runtime.store.db.updateTable('web_sessions').set({ last_seen_at: new Date(Date.now() - 29 * 60_000).toISOString() }).execute();
  assert.equal((await web.get('/account/keys')).statusCode, 200);
  // 31 minutes idle: over, and the row is gone.
  await t.runtime.store.db.updateTable('web_sessions').set({ last_seen_at: new Date(Date.now() - 31 * 60_000).toISOString() }).execute();
  const res = await web.get('/account/keys');
  assert.equal(res.statusCode, 303);
  assert.equal(res.headers.location, '/login?next=%2Faccount%2Fkeys');
  const rows = await t.runtime.store.db.selectFrom('web_sessions').select('id').execute();
  const { sessionDigest } = await import('../../services/web-sessions.ts');
  assert.ok(!rows.some((r) => r.id === sessionDigest(token)), 'the idle session was deleted');
});

test('the store keeps only a digest of the session token', async () => {
  const web = new WebClient(t);
  await web.signup();
  const token = web.cookies.get('ac_session')!;
  const rows = await t.runtime.store.db.selectFrom('web_sessions').selectAll().execute();
  assert.ok(rows.length > 0);
  for (const row of rows) assert.ok(!JSON.stringify(row).includes(token));
});

test('a form posted from another origin is refused, even with a valid token', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.get('/account/keys');
  const cases: Record<string, string>[] = [
    { origin: 'http://evil.example' },
    { origin: 'null' },
    { 'sec-fetch-site': 'cross-site' },
    { 'sec-fetch-site': 'same-site' },
    { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' },
  ];
  for (const headers of cases) {
    const res = await web.post('/account/keys', { label: 'sneaky' }, headers);
    assert.equal(res.statusCode, 403, JSON.stringify(headers));
    assert.match(res.body, /sent from another site/);
  }
  const user = await t.runtime.services.accounts.findByEmail(email);
  assert.deepEqual((await t.runtime.services.keys.list(user!.id)).map((k) => k.label), [], 'no key was created');
});

test('a same-origin form is accepted (Origin and Sec-Fetch-Site as a browser sends them)', async () => {
  const web = new WebClient(t);
  await web.signup();
  await web.get('/account/keys');
  const res = await web.post('/account/keys', { label: 'fine' }, { origin: 'http://localhost:80', 'sec-fetch-site': 'same-origin' });
  assert.equal(res.statusCode, 303);
});

test('a form without the CSRF token, or with another session\'s token, is refused', async () => {
  const victim = new WebClient(t);
  await victim.signup();
  const attacker = new WebClient(t);
  await attacker.signup();
  await attacker.get('/account/keys');

  victim.csrf = '';
  let res = await victim.post('/account/keys', { label: 'no token' });
  assert.equal(res.statusCode, 403);
  assert.match(res.body, /could not be verified/);

  victim.csrf = attacker.csrf;
  res = await victim.post('/account/keys', { label: 'wrong token' });
  assert.equal(res.statusCode, 403);

  // Log out is a form too.
  victim.csrf = 'x';
  res = await victim.post('/logout');
  assert.equal(res.statusCode, 403);
  assert.equal((await victim.get('/account/keys')).statusCode, 200, 'still signed in');
});

test('log-in and sign-up forms need the pre-login token (no log-in CSRF)', async () => {
  const web = new WebClient(t);
  const res = await t.inject({
    method: 'POST', url: '/login', headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'email=a%40example.test&password=whatever1',
  });
  assert.equal(res.statusCode, 403);
  await web.get('/signup');
  web.csrf = 'A'.repeat(32);
  const signup = await web.post('/signup', { email: 'csrf@example.test', password: 'a long password' });
  assert.equal(signup.statusCode, 403);
  assert.equal(await t.runtime.services.accounts.findByEmail('csrf@example.test'), undefined);
});

test('log-in attempts are throttled per account, even with the right password afterwards', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.post('/logout');
  for (let i = 0; i < 5; i++) {
    await web.get('/login');
    const res = await web.post('/login', { email, password: 'wrong password' });
    assert.equal(res.statusCode, 401);
    assert.match(res.body, /do not match an account/);
  }
  await web.get('/login');
  const locked = await web.post('/login', { email, password: 'correct horse battery' });
  assert.equal(locked.statusCode, 429);
  assert.match(locked.body, /Too many failed attempts/);
  assert.ok(Number(locked.headers['retry-after']) > 0);
  assert.equal(web.cookies.get('ac_session'), undefined, 'no session was started');

  // Another address gets the same answer for this account.
  const elsewhere = new WebClient(t, { ip: '10.0.0.9' });
  await elsewhere.get('/login');
  assert.equal((await elsewhere.post('/login', { email, password: 'correct horse battery' })).statusCode, 429);
});

test('log-in attempts are throttled per IP address across accounts', async () => {
  const web = new WebClient(t, { ip: '10.1.2.3' });
  await web.get('/login');
  let last = 0;
  for (let i = 0; i < 31; i++) {
    const res = await web.post('/login', { email: `nobody-${i}@example.test`, password: 'wrong password' });
    last = res.statusCode;
    if (last === 429) break;
  }
  assert.equal(last, 429);
  // Other addresses are not affected.
  const other = new WebClient(t, { ip: '10.1.2.4' });
  await other.get('/login');
  assert.equal((await other.post('/login', { email: 'nobody@example.test', password: 'wrong password' })).statusCode, 401);
});

test('an unknown email and a wrong password get the same answer', async () => {
  const web = new WebClient(t, { ip: '10.5.5.5' });
  const email = await web.signup();
  await web.post('/logout');
  await web.get('/login');
  const wrong = await web.post('/login', { email, password: 'wrong password' });
  const unknown = await web.post('/login', { email: 'unknown@example.test', password: 'wrong password' });
  assert.equal(wrong.statusCode, unknown.statusCode);
  const message = (body: string) => /<div class="notice[^"]*" role="alert">([^<]*)<\/div>/.exec(body)?.[1];
  assert.equal(message(wrong.body), message(unknown.body));
});

test('after log-in only local paths are followed (no open redirect)', async () => {
  const web = new WebClient(t, { ip: '10.6.6.6' });
  const email = await web.signup();
  await web.post('/logout');
  for (const next of ['https://evil.example/', '//evil.example/x', '/\\evil.example']) {
    await web.get('/login');
    const res = await web.post('/login', { email, password: 'correct horse battery', next });
    assert.equal(res.statusCode, 303);
    assert.equal(res.headers.location, '/', next);
    await web.post('/logout');
  }
});

test('the API channel still refuses form bodies (415), the web parsers stay inside the web app', async () => {
  const u = await t.user();
  const res = await t.inject({
    method: 'POST', url: '/api/v1/api-channel/agents',
    headers: { ...u.auth, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'agent_name=x',
  });
  assert.equal(res.statusCode, 415);
  assert.equal(res.json().code, 'unsupported_media_type');
  const missing = await t.inject({ method: 'GET', url: '/api/v1/api-channel/nope', headers: { accept: 'text/html' } });
  assert.equal(missing.statusCode, 404);
  assert.match(String(missing.headers['content-type']), /application\/problem\+json/);
});

test('a page that does not exist is an HTML 404 for browsers', async () => {
  const res = await new WebClient(t).get('/no/such/page');
  assert.equal(res.statusCode, 404);
  assert.match(String(res.headers['content-type']), /^text\/html/);
  assert.match(res.body, /Page not found/);
});


test('sessions that ran out are swept away at the next log-in', async () => {
  const idle = new WebClient(t);
  await idle.signup();
  const idleToken = idle.cookies.get('ac_session')!;
  const { sessionDigest } = await import('../../services/web-sessions.ts');
  await t.runtime.store.db.updateTable('web_sessions').set({ last_seen_at: new Date(Date.now() - 3 * 3_600_000).toISOString() })
    .where('id', '=', sessionDigest(idleToken)).execute();
  const other = new WebClient(t, { ip: '10.9.9.9' });
  await other.signup();
  const deadline = Date.now() + 5_000;
  for (;;) {
    const left = await t.runtime.store.db.selectFrom('web_sessions').select('id').where('id', '=', sessionDigest(idleToken)).execute();
    if (left.length === 0) break;
    assert.ok(Date.now() < deadline, 'the idle session was swept');
    await new Promise((r) => setTimeout(r, 20));
  }
});
