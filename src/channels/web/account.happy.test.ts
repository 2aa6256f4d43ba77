import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, type TestApp, withTestApp } from '../../testing/harness.ts';
import { setCookieLines, WebClient } from '../../testing/web-client.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('the start page invites a visitor to sign up or log in', async () => {
  const res = await new WebClient(t).get('/');
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/html/);
  assert.match(res.body, /href="\/signup"/);
  assert.match(res.body, /<main id="main"/);
});

test('sign up creates the account, signs it in, and leads to the agents page', async () => {
  const web = new WebClient(t);
  await web.get('/signup');
  const res = await web.post('/signup', { email: 'New.Person@Example.test', password: 'a long password' });
  assert.equal(res.statusCode, 303);
  assert.equal(res.headers.location, '/agents?welcome=1');
  const user = await t.runtime.services.accounts.findByEmail('new.person@example.test');
  assert.ok(user, 'the user exists');
  assert.match(user.password_hash, /^scrypt\$/);
  const agents = await web.get('/agents?welcome=1');
  assert.equal(agents.statusCode, 200);
  assert.match(agents.body, /Welcome! Your account is ready/);
  assert.match(agents.body, /new\.person@example\.test/);
});

test('the session cookie is HttpOnly and SameSite=Strict, and Secure only over TLS', async () => {
  const web = new WebClient(t);
  await web.get('/signup');
  const res = await web.post('/signup', { email: `plain-${Date.now()}@example.test`, password: 'a long password' });
  const cookie = setCookieLines(res).find((line) => line.startsWith('ac_session='));
  assert.ok(cookie);
  assert.match(cookie, /HttpOnly/);
  assert.match(cookie, /SameSite=Strict/);
  assert.match(cookie, /Path=\//);
  assert.doesNotMatch(cookie, /Secure/);

  await withTestApp(async (tls) => {
    const secure = new WebClient(tls);
    await secure.get('/signup', { 'x-forwarded-proto': 'https' });
    const signup = await secure.post('/signup', { email: 'tls@example.test', password: 'a long password' }, { 'x-forwarded-proto': 'https' });
    assert.equal(signup.statusCode, 303);
    const tlsCookie = setCookieLines(signup).find((line) => line.startsWith('ac_session='));
    assert.ok(tlsCookie);
    assert.match(tlsCookie, /; Secure/);
    assert.match(tlsCookie, /HttpOnly/);
    assert.match(tlsCookie, /SameSite=Strict/);
  }, { trustProxy: true });
});

test('log in issues a new session token (rotation) and the old one stops working', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  const first = web.cookies.get('ac_session');
  assert.ok(first);
  const res = await web.login(email);
  assert.equal(res.statusCode, 303);
  const second = web.cookies.get('ac_session');
  assert.ok(second);
  assert.notEqual(first, second);
  const old = await t.inject({ method: 'GET', url: '/account/keys', headers: { accept: 'text/html', cookie: `ac_session=${first}` } });
  assert.equal(old.statusCode, 303, 'the replaced session no longer signs in');
  const current = await web.get('/account/keys');
  assert.equal(current.statusCode, 200);
});

test('log in goes back to the page that asked for it', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.post('/logout');
  const asked = await web.get('/account/keys');
  assert.equal(asked.statusCode, 303);
  assert.equal(asked.headers.location, '/login?next=%2Faccount%2Fkeys');
  await web.get('/login?next=%2Faccount%2Fkeys');
  const res = await web.post('/login', { email, password: 'correct horse battery', next: '/account/keys' });
  assert.equal(res.statusCode, 303);
  assert.equal(res.headers.location, '/account/keys');
});

test('log out ends the session on the server, not just in the browser', async () => {
  const web = new WebClient(t);
  await web.signup();
  const token = web.cookies.get('ac_session');
  const res = await web.post('/logout');
  assert.equal(res.statusCode, 303);
  assert.equal(res.headers.location, '/login?bye=1');
  assert.ok(setCookieLines(res).some((line) => line.startsWith('ac_session=;')), 'the cookie is cleared');
  const replay = await t.inject({ method: 'GET', url: '/agents', headers: { accept: 'text/html', cookie: `ac_session=${token}` } });
  assert.equal(replay.statusCode, 303);
  assert.match(String(replay.headers.location), /^\/login/);
  const bye = await web.get('/login?bye=1');
  assert.match(bye.body, /You are logged out/);
});

test('pages carry a strict content security policy and are not cached', async () => {
  const web = new WebClient(t);
  await web.signup();
  const res = await web.get('/account/keys');
  assert.match(String(res.headers['content-security-policy']), /script-src 'self'/);
  assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
  assert.equal(res.headers['cache-control'], 'no-store');
});

test('static assets are served with a validator', async () => {
  const css = await t.inject({ method: 'GET', url: '/assets/app.css' });
  assert.equal(css.statusCode, 200);
  assert.match(String(css.headers['content-type']), /^text\/css/);
  const again = await t.inject({ method: 'GET', url: '/assets/app.css', headers: { 'if-none-match': String(css.headers.etag) } });
  assert.equal(again.statusCode, 304);
  const js = await t.inject({ method: 'GET', url: '/assets/app.js' });
  assert.match(String(js.headers['content-type']), /^text\/javascript/);
});

test('sign-up mistakes are sentences that name the field', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.post('/logout');
  const other = new WebClient(t);
  await other.get('/signup');
  const error = (body: string, name: string) => new RegExp(`id="f-${name}-error">([^<]*)</p>`).exec(body)?.[1];
  const taken = await other.post('/signup', { email: email.toUpperCase(), password: 'a long password' });
  assert.equal(taken.statusCode, 422);
  // A screen reader says the title first: it says that the form came back with errors.
  assert.match(taken.body, /<title>Error: Sign up · agent-channel<\/title>/);
  assert.match((await other.get('/signup')).body, /<title>Sign up · agent-channel<\/title>/);
  assert.match(taken.body, /id="f-email-error">An account with this email already exists\. <a href="\/login">Log in instead<\/a>, or use another email\.<\/p>/);
  const bad = await other.post('/signup', { email: 'not an email', password: 'short' });
  assert.equal(error(bad.body, 'email'), 'Enter an email address, such as name@example.com (at most 254 characters).');
  assert.equal(error(bad.body, 'password'), 'Password must be at least 8 characters.');
  const long = await other.post('/signup', { email: `long-${Date.now()}@example.test`, password: 'p'.repeat(257) });
  assert.equal(error(long.body, 'password'), 'Password must be at most 256 characters.');
  for (const res of [taken, bad, long]) assert.doesNotMatch(res.body, />is already registered|>must be|Too big|Too small/, 'no fragments');
});
