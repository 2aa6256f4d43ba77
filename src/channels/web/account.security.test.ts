import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sessionDigest } from '../../services/web-sessions.ts';
import { startTestApp, type TestApp, withTestApp } from '../../testing/harness.ts';
import { safeNext } from './context.ts';
import { WebClient } from '../../testing/web-client.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ webSessionIdleMinutes: 30 }); });
after(async () => { await t.close(); });

test('a session idle for longer than the timeout is over', async () => {
  const web = new WebClient(t);
  await web.signup();
  const token = web.cookies.get('ac_session')!;
  assert.equal((await web.get('/account/keys')).statusCode, 200);
  // 29 minutes idle: still signed in (and the visit counts as activity).
  const idleSince = new Date(Date.now() - 29 * 60_000).toISOString();
  await t.runtime.store.db.updateTable('web_sessions').set({ last_seen_at: idleSince }).execute();
  assert.equal((await web.get('/account/keys')).statusCode, 200);
  const seen = await t.runtime.store.db.selectFrom('web_sessions').select('last_seen_at').where('id', '=', sessionDigest(token)).executeTakeFirstOrThrow();
  assert.ok(Date.parse(seen.last_seen_at) > Date.parse(idleSince) + 28 * 60_000, `the visit was recorded (last seen ${seen.last_seen_at})`);
  // 31 minutes idle: over, and the row is gone.
  await t.runtime.store.db.updateTable('web_sessions').set({ last_seen_at: new Date(Date.now() - 31 * 60_000).toISOString() }).execute();
  const res = await web.get('/account/keys');
  assert.equal(res.statusCode, 303);
  assert.equal(res.headers.location, '/login?next=%2Faccount%2Fkeys');
  const rows = await t.runtime.store.db.selectFrom('web_sessions').select('id').execute();
  assert.ok(!rows.some((r) => r.id === sessionDigest(token)), 'the idle session was deleted');
});

test('a session is over at its absolute end, however busy, from that very millisecond', async () => {
  const { webSessions } = t.runtime.services;
  const signedIn = async () => {
    const web = new WebClient(t);
    await web.signup();
    const token = web.cookies.get('ac_session')!;
    return { web, token, id: sessionDigest(token) };
  };
  const endsAt = (id: string, at: Date) => t.runtime.store.db.updateTable('web_sessions').set({ expires_at: at.toISOString() }).where('id', '=', id).execute();
  const exists = async (id: string) => (await t.runtime.store.db.selectFrom('web_sessions').select('id').where('id', '=', id).execute()).length === 1;

  // In use a moment ago, but past its end: signed out, and the row is gone.
  const busy = await signedIn();
  await endsAt(busy.id, new Date(Date.now() - 1000));
  const res = await busy.web.get('/account/keys');
  assert.equal(res.statusCode, 303);
  assert.equal(res.headers.location, '/login?next=%2Faccount%2Fkeys');
  assert.equal(await exists(busy.id), false);

  // Its end is exclusive: live at the millisecond before, over at it (for resolve and the sweep alike).
  const end = new Date(Date.now() + 10 * 60_000);
  const edge = await signedIn();
  await endsAt(edge.id, end);
  assert.ok(await webSessions.resolve(edge.token, new Date(end.getTime() - 1)));
  assert.equal(await webSessions.resolve(edge.token, end), null);
  const swept = await signedIn();
  await endsAt(swept.id, end);
  await webSessions.sweep(new Date(end.getTime() - 1));
  assert.equal(await exists(swept.id), true, 'kept by a sweep before its end');
  await webSessions.sweep(end);
  assert.equal(await exists(swept.id), false, 'deleted by a sweep at its end');
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

test('behind a TLS-terminating proxy without TRUST_PROXY, same-origin forms still work', async () => {
  // The browser is on https://app.example; the proxy forwards plain http with the same Host.
  const web = new WebClient(t);
  await web.signup();
  await web.get('/account/keys', { host: 'app.example' });
  const proxied = { host: 'app.example', origin: 'https://app.example' };
  // A browser with Fetch metadata: trusted on it, the Origin's scheme does not matter.
  let res = await web.post('/account/keys', { label: 'via proxy' }, { ...proxied, 'sec-fetch-site': 'same-origin' });
  assert.equal(res.statusCode, 303, res.body.slice(0, 300));
  // Without Fetch metadata: the Origin's host is compared with Host, not its scheme.
  res = await web.post('/account/keys', { label: 'old browser' }, proxied);
  assert.equal(res.statusCode, 303, res.body.slice(0, 300));
  const refused: Record<string, string>[] = [
    { host: 'app.example', origin: 'https://evil.example' },
    { host: 'app.example', origin: 'https://app.example.evil.example' },
    { host: 'app.example', origin: 'https://app.example:8443' },
    { host: 'app.example:8080', origin: 'http://app.example' },
    { host: 'app.example', origin: 'ftp://app.example' },
    { host: 'app.example', origin: 'null' },
    { host: 'app.example', origin: 'https://app.example', 'sec-fetch-site': 'same-site' },
    { host: 'app.example', origin: 'https://app.example', 'sec-fetch-site': 'cross-site' },
  ];
  for (const headers of refused) {
    res = await web.post('/account/keys', { label: 'refused' }, headers);
    assert.equal(res.statusCode, 403, JSON.stringify(headers));
    assert.match(res.body, /sent from another site/);
  }
  // The token stays required however trusted the request looks.
  const token = web.csrf;
  web.csrf = 'wrong';
  res = await web.post('/account/keys', { label: 'no token' }, { ...proxied, 'sec-fetch-site': 'same-origin' });
  assert.equal(res.statusCode, 403);
  assert.match(res.body, /could not be verified/);
  web.csrf = token;
  res = await web.post('/account/keys', { label: 'on a port' }, { host: 'app.example:8080', origin: 'http://app.example:8080' });
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
    assert.match(res.body, /<title>Error: Log in · agent-channel<\/title>/);
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

test('behind a proxy named in TRUST_PROXY, the proxy says who the client is; nobody else can', async () => {
  /** 35 wrong log-ins on 35 accounts from the address `from`, the i-th carrying `forwardedFor(i)`. */
  const spray = async (t: TestApp, from: string, forwardedFor: (i: number) => string) => {
    const web = new WebClient(t, { ip: from });
    await web.get('/login', { 'x-forwarded-for': forwardedFor(0) });
    const codes: number[] = [];
    for (let i = 0; i < 35; i++) {
      const res = await web.post('/login', { email: `sprayed-${i}@example.test`, password: 'wrong password' }, { 'x-forwarded-for': forwardedFor(i) });
      codes.push(res.statusCode);
    }
    return codes.filter((c) => c === 429).length;
  };
  await withTestApp(async (proxied) => {
    // Through the proxy (10.30.0.1), which appends the real client after whatever the client sent.
    assert.equal(await spray(proxied, '10.30.0.1', (i) => `203.0.113.${i}, 198.51.100.7`), 5, 'the client the proxy saw is throttled');
    // Straight to the port from elsewhere, naming a new address each time: the header is not believed.
    assert.equal(await spray(proxied, '192.0.2.50', (i) => `203.0.113.${i}`), 5, 'the direct client is throttled by its own address');
  }, { trustProxy: ['10.30.0.1'] });
  // Believing every hop (TRUST_PROXY=true) lets any client choose: the README warns of it.
  await withTestApp(async (everyHop) => {
    assert.equal(await spray(everyHop, '10.30.0.2', (i) => `203.0.113.${i}, 198.51.100.9`), 0);
  }, { trustProxy: true });
});

test('parallel wrong passwords are throttled too: each attempt counts when it starts', async () => {
  const owner = new WebClient(t, { ip: '10.20.0.1' });
  const email = await owner.signup();
  await owner.post('/logout');
  const web = new WebClient(t, { ip: '10.20.0.2' });
  await web.get('/login');
  const results = await Promise.all(Array.from({ length: 20 }, () => web.post('/login', { email, password: 'wrong password' })));
  const codes = results.map((r) => r.statusCode);
  assert.equal(codes.filter((c) => c === 401).length, 5, `5 checked, the rest refused: ${codes.join(',')}`);
  assert.equal(codes.filter((c) => c === 429).length, 15);

  // Per IP as well: 40 parallel attempts on 40 accounts from one address, 30 get checked.
  const spray = new WebClient(t, { ip: '10.20.0.3' });
  await spray.get('/login');
  const sprayed = await Promise.all(Array.from({ length: 40 }, (_, i) => spray.post('/login', { email: `spray-${i}@example.test`, password: 'wrong password' })));
  assert.equal(sprayed.filter((r) => r.statusCode === 401).length, 30);
  assert.equal(sprayed.filter((r) => r.statusCode === 429).length, 10);
});

test('a successful log-in is forgiven: it uses up no attempt of the IP or the account', async () => {
  const web = new WebClient(t, { ip: '10.21.0.1' });
  const email = await web.signup();
  for (let i = 0; i < 35; i++) {
    await web.post('/logout');
    await web.get('/login');
    const res = await web.post('/login', { email, password: 'correct horse battery' });
    assert.equal(res.statusCode, 303, `log-in ${i + 1}`);
  }
  // Four failures and then the right password: the account starts afresh.
  await web.post('/logout');
  await web.get('/login');
  for (let i = 0; i < 4; i++) assert.equal((await web.post('/login', { email, password: 'wrong password' })).statusCode, 401);
  assert.equal((await web.post('/login', { email, password: 'correct horse battery' })).statusCode, 303);
  await web.post('/logout');
  await web.get('/login');
  for (let i = 0; i < 4; i++) assert.equal((await web.post('/login', { email, password: 'wrong password' })).statusCode, 401);
});

test('sign-ups are throttled per IP address, parallel ones included', async () => {
  const web = new WebClient(t, { ip: '10.22.0.1' });
  await web.get('/signup');
  const results = await Promise.all(Array.from({ length: 14 }, (_, i) => web.post('/signup', {
    email: i % 2 ? `flood-${i}@example.test` : 'not an email', password: 'a long password',
  })));
  const codes = results.map((r) => r.statusCode);
  assert.equal(codes.filter((c) => c !== 429).length, 10, `10 went ahead (created or refused as invalid): ${codes.join(',')}`);
  const refused = results.find((r) => r.statusCode === 429)!;
  assert.ok(Number(refused.headers['retry-after']) > 0);
  assert.match(refused.body, /Too many sign-ups from your network just now\. Try again in \d+ minutes?\./);
  assert.match(refused.body, /value="(not an email|flood-\d+@example\.test)"/, 'the form keeps the email');
  // Another address is not affected.
  const other = new WebClient(t, { ip: '10.22.0.2' });
  await other.get('/signup');
  assert.equal((await other.post('/signup', { email: `calm-${Date.now()}@example.test`, password: 'a long password' })).statusCode, 303);
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

// Values a browser would follow off the site (tab/newline dropped, "\\" read as "/"), or that
// cannot go into a Location header at all.
const HOSTILE_NEXT = [
  'https://evil.example/', '//evil.example/x', '/\\evil.example', '\\/evil.example', '/\t/evil.example', '/\n/evil.example',
  '/\r\n/evil.example', '\t//evil.example', '/ /evil.example', '/\u00a0/evil.example', '/\u2713',
  '/caf\u00e9', 'javascript:alert(1)', 'evil.example', '', `/${'a'.repeat(600)}`, '/\u3000/evil.example', '/\\\\evil.example',
];

test('safeNext keeps only paths on this site, as a browser would resolve them', () => {
  for (const next of [...HOSTILE_NEXT, '/\u0000/evil.example']) assert.equal(safeNext(next), '/', JSON.stringify(next));
  for (const next of ['/', '/account/keys', '/chat?session=ses_abc&x=1#end', '/conversations?before=2026-11-22T12%3A00%3A00Z']) {
    assert.equal(safeNext(next), next);
  }
  // Encoded forms stay encoded: the browser asks this site for that path, it never goes elsewhere.
  for (const next of ['/%2F%2Fevil.example', '/%5Cevil.example', '/%09/evil.example', '/%252F%252Fevil.example', '/..//evil.example', '/./\\evil']) {
    const kept = safeNext(next);
    assert.equal(new URL(kept, 'https://app.example/login').origin, 'https://app.example', next);
  }
  assert.equal(safeNext(undefined), '/');
  assert.equal(safeNext(['/a']), '/');
});

test('after log-in only local paths are followed (no open redirect, no 500)', async () => {
  const web = new WebClient(t, { ip: '10.6.6.6' });
  const email = await web.signup();
  await web.post('/logout');
  // (A NUL character is refused before any page sees it, with a 422: left out here.)
  for (const next of HOSTILE_NEXT) {
    await web.get('/login');
    const res = await web.post('/login', { email, password: 'correct horse battery', next });
    assert.equal(res.statusCode, 303, JSON.stringify(next));
    assert.equal(res.headers.location, '/', JSON.stringify(next));
    // Signed in, the log-in page itself redirects to `next` at once: the same rule applies.
    const again = await web.get(`/login?next=${encodeURIComponent(next)}`);
    assert.equal(again.statusCode, 303, JSON.stringify(next));
    assert.equal(again.headers.location, '/', JSON.stringify(next));
    await web.post('/logout');
  }
  await web.get('/login');
  const local = await web.post('/login', { email, password: 'correct horse battery', next: '/chat?agent=agt_x#top' });
  assert.equal(local.headers.location, '/chat?agent=agt_x#top');
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


test('a session that ran out is deleted by the periodic sweep, whether or not anyone logs in again', async () => {
  const idle = new WebClient(t);
  await idle.signup();
  const idleToken = idle.cookies.get('ac_session')!;
  const row = () => t.runtime.store.db.selectFrom('web_sessions').select('id').where('id', '=', sessionDigest(idleToken)).execute();
  await t.runtime.store.db.updateTable('web_sessions').set({ last_seen_at: new Date(Date.now() - 3 * 3_600_000).toISOString() })
    .where('id', '=', sessionDigest(idleToken)).execute();
  assert.equal((await row()).length, 1);
  await t.runtime.services.housekeeping.runOnce();
  assert.deepEqual(await row(), []);
});
