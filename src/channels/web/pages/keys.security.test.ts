import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';
import { WebClient } from '../web-client.test-helper.ts';

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
