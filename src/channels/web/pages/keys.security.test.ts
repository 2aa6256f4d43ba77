import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, withTestApp, type TestApp } from '../../../testing/harness.ts';
import { setCookieLines, WebClient } from '../../../testing/web-client.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test("another account's key id answers 404, on the confirmation page and on the revoke itself", async () => {
  const owner = await t.user();
  const { key } = await t.runtime.services.keys.create(owner.id, { label: 'owners-private-label' });
  const web = new WebClient(t);
  await web.signup();
  const confirm = await web.get(`/account/keys/${key.key_id}/revoke`);
  assert.equal(confirm.statusCode, 404);
  assert.ok(!confirm.body.includes('owners-private-label'), "the other key's label is not shown");
  await web.get('/account/keys');
  const revoke = await web.post(`/account/keys/${owner.keyId}/revoke`);
  assert.equal(revoke.statusCode, 404);
  assert.equal((await t.inject({ method: 'GET', url: `${API}/agents`, headers: owner.auth })).statusCode, 200, 'the key still works');
  const missing = await web.post('/account/keys/NoSuchKey123/revoke');
  assert.equal(missing.statusCode, 404);
  assert.equal(missing.body.replaceAll(/NoSuchKey123|[0-9a-f-]{36}/g, ''), revoke.body.replaceAll(new RegExp(`${owner.keyId}|[0-9a-f-]{36}`, 'g'), ''),
    'a missing key and another account\'s key look the same');
});

test("only the creator's keys are listed", async () => {
  const other = await t.user();
  const web = new WebClient(t);
  await web.signup();
  const res = await web.get('/account/keys');
  assert.ok(!res.body.includes(other.keyId));
  assert.match(res.body, /You have no API keys yet/);
});

test('HTML in a key label is escaped everywhere it is shown', async () => {
  const web = new WebClient(t);
  await web.signup();
  await web.get('/account/keys');
  const label = `<script>alert("x")</script><img src=x onerror=alert(1)>`;
  await web.post('/account/keys', { label });
  const page = await web.get('/account/keys');
  assert.ok(!page.body.includes('<script>alert'), 'no live script');
  assert.ok(!page.body.includes('<img src=x'), 'no live image');
  assert.ok(page.body.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;'));
  const keyId = /data-key-id="([A-Za-z0-9]+)"/.exec(page.body)![1]!;
  const confirm = await web.get(`/account/keys/${keyId}/revoke`);
  assert.ok(!confirm.body.includes('<script>alert'));
  assert.ok(confirm.body.includes('&lt;script&gt;'));
});

test('the secret is never shown to another account, even given the flash cookie', async () => {
  const alice = new WebClient(t);
  await alice.signup();
  await alice.get('/account/keys');
  await alice.post('/account/keys', { label: 'alice key' });
  const flash = alice.cookies.get('ac_new_key');
  assert.ok(flash);
  const mallory = new WebClient(t);
  await mallory.signup();
  mallory.cookies.set('ac_new_key', flash);
  const res = await mallory.get('/account/keys');
  assert.ok(!res.body.includes(flash), "another account's key is not shown");
});

test('the pages of the account need a signed-in user', async () => {
  for (const url of ['/account', '/account/keys', '/account/keys/abc/revoke', '/agents', '/conversations', '/chat', '/inbox']) {
    const res = await new WebClient(t).get(url);
    assert.equal(res.statusCode, 303, url);
    assert.match(String(res.headers.location), /^\/login\?next=/);
  }
  const post = await t.inject({ method: 'POST', url: '/account/keys', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'label=x' });
  assert.equal(post.statusCode, 403, 'no token, no session: refused before anything else');
});

test('the new key travels in a session cookie that holds no readable secret, and the database holds only a digest', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.get('/account/keys');
  const created = await web.post('/account/keys', { label: 'sealed key' });
  const line = setCookieLines(created).find((l) => l.startsWith('ac_new_key='));
  assert.ok(line, 'the cookie is set');
  assert.doesNotMatch(line, /Max-Age|Expires/i, 'a session cookie: the browser does not write it to disk');
  assert.match(line, /HttpOnly/);
  assert.match(line, /SameSite=Strict/);
  assert.match(line, /Path=\/account\/keys/);
  const value = web.cookies.get('ac_new_key')!;

  const shown = await web.get('/account/keys');
  const token = /id="new-key"[^>]*>.*?<code>(ak_[A-Za-z0-9]+_[A-Za-z0-9]+)<\/code>/.exec(shown.body)![1]!;
  const [, keyId, secret] = token.split('_') as [string, string, string];
  assert.ok(!value.includes(secret) && !value.includes(token), 'the cookie does not carry the secret in the clear');
  assert.ok(!Buffer.from(value.split('.')[1] ?? '', 'base64url').toString('latin1').includes(secret), 'not even encoded');
  assert.ok(setCookieLines(shown).some((l) => /^ac_new_key=;/.test(l)), 'cleared once shown');

  // Only a digest is stored: the secret is in no row of the key or its audit trail.
  const user = await t.runtime.services.accounts.findByEmail(email);
  const rows = [
    ...await t.runtime.store.db.selectFrom('api_keys').selectAll().where('user_id', '=', user!.id).execute(),
    ...await t.runtime.store.db.selectFrom('audit_log').selectAll().where('subject_id', '=', keyId).execute(),
    ...await t.runtime.store.db.selectFrom('web_sessions').selectAll().where('user_id', '=', user!.id).execute(),
  ];
  assert.ok(rows.length >= 3);
  for (const row of rows) assert.ok(!JSON.stringify(row).includes(secret), 'no secret in the database');
});

test('another instance of the deployment (here: this one restarted) shows the new secret once; a tampered cookie shows none', async () => {
  await withTestApp(async (first) => {
    const web = new WebClient(first);
    await web.signup();
    await web.get('/account/keys');
    await web.post('/account/keys', { label: 'moved key' });
    const flash = web.cookies.get('ac_new_key')!;
    // The redirect may land on another instance over the same database (PostgreSQL), or on this
    // one after a restart: the sealing key is the deployment's, so the secret is shown there, once.
    const restarted = await first.restart();
    try {
      const show = (cookie: string) => restarted.inject({ method: 'GET', url: '/account/keys', headers: { accept: 'text/html', cookie } });
      const res = await show(web.cookieHeader());
      assert.equal(res.statusCode, 200);
      assert.match(res.body, /id="new-key"/);
      assert.match(res.body, /ak_[A-Za-z0-9]+_[A-Za-z0-9]+/);
      assert.ok(setCookieLines(res).some((l) => /^ac_new_key=;/.test(l)), 'and the cookie is cleared');
      // A cookie that was tampered with (or sealed elsewhere) shows no secret, only that it is gone.
      web.cookies.set('ac_new_key', `${flash.slice(0, -4)}AAAA`);
      const tampered = await show(web.cookieHeader());
      assert.doesNotMatch(tampered.body, /id="new-key"/);
      assert.doesNotMatch(tampered.body, /ak_[A-Za-z0-9]+_[A-Za-z0-9]{20,}/);
      assert.match(tampered.body, /Key “moved key” \(<code>[A-Za-z0-9]+<\/code>\) was created, but its secret can no longer be shown/);
    } finally {
      await restarted.close();
    }
  });
});
