import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';
import { WebClient } from '../web-client.test-helper.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const secretOf = (body: string) => /id="new-key"[^>]*value="(ak_[A-Za-z0-9]+_[A-Za-z0-9]+)"/.exec(body)?.[1];

test('the create form shows the defaults', async () => {
  const web = new WebClient(t);
  await web.signup();
  const res = await web.get('/account/keys');
  assert.equal(res.statusCode, 200);
  assert.match(res.body, /<label for="f-label">Label<\/label>/);
  assert.match(res.body, /Default 60; at most 10000\./);
  assert.match(res.body, /Default: never expires/);
  assert.match(res.body, /You have no API keys yet/);
});

test('a new key is shown exactly once, with a copy button and a warning, and works against the API', async () => {
  const web = new WebClient(t);
  await web.signup();
  await web.get('/account/keys');
  const created = await web.post('/account/keys', { label: 'billing backend', rate_limit: '120', expires_in_days: '30' });
  assert.equal(created.statusCode, 303);
  assert.equal(created.headers.location, '/account/keys');
  assert.doesNotMatch(created.body, /ak_/, 'the redirect itself carries no secret');

  const shown = await web.get('/account/keys');
  const token = secretOf(shown.body);
  assert.ok(token, 'the secret is on the page');
  assert.match(shown.body, /data-copy="#new-key"/);
  assert.match(shown.body, /shown only this once/);

  const again = await web.get('/account/keys');
  assert.equal(secretOf(again.body), undefined, 'gone on reload');
  assert.ok(!again.body.includes(token));

  const keyId = token.split('_')[1]!;
  const row = new RegExp(`<tr data-key-id="${keyId}">([\\s\\S]*?)</tr>`).exec(again.body)?.[1] ?? '';
  assert.match(row, /billing backend/);
  assert.match(row, /badge-active/);
  assert.match(row, /120\/min/);
  assert.match(row, /<td data-label="Last used"><span class="muted">never<\/span>/);
  assert.match(row, /<td data-label="Expires"><time datetime=/);

  const api = await t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization: `Bearer ${token}` } });
  assert.equal(api.statusCode, 200);
});

test('defaults apply when rate limit and expiry are left empty', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.get('/account/keys');
  assert.equal((await web.post('/account/keys', { label: 'defaults', rate_limit: '', expires_in_days: '' })).statusCode, 303);
  const user = await t.runtime.services.accounts.findByEmail(email);
  const [key] = await t.runtime.services.keys.list(user!.id);
  assert.equal(key!.rate_limit, 60);
  assert.equal(key!.expires_at, null);
});

test('invalid input is shown next to the field and nothing is created', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.get('/account/keys');
  const res = await web.post('/account/keys', { label: '  ', rate_limit: 'lots', expires_in_days: '0' });
  assert.equal(res.statusCode, 422);
  assert.match(res.body, /A label is required/);
  assert.match(res.body, /Enter a whole number/);
  assert.match(res.body, /aria-invalid="true"/);
  const tooBig = await web.post('/account/keys', { label: 'big', rate_limit: '99999999' });
  assert.equal(tooBig.statusCode, 422);
  assert.match(tooBig.body, /id="f-rate_limit-error"/);
  const user = await t.runtime.services.accounts.findByEmail(email);
  assert.deepEqual(await t.runtime.services.keys.list(user!.id), []);
});

test('revoking asks for confirmation first, then the key gets 401', async () => {
  const web = new WebClient(t);
  await web.signup();
  await web.get('/account/keys');
  await web.post('/account/keys', { label: 'to revoke' });
  const token = secretOf((await web.get('/account/keys')).body)!;
  const keyId = token.split('_')[1]!;

  const confirm = await web.get(`/account/keys/${keyId}/revoke`);
  assert.equal(confirm.statusCode, 200);
  assert.match(confirm.body, /Revoke “to revoke”\?/);
  assert.match(confirm.body, /will stop working at once/);
  assert.equal((await t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization: `Bearer ${token}` } })).statusCode, 200,
    'viewing the confirmation revokes nothing');

  const revoked = await web.post(`/account/keys/${keyId}/revoke`);
  assert.equal(revoked.statusCode, 303);
  const list = await web.get(String(revoked.headers.location));
  assert.match(list.body, /is revoked/);
  assert.match(list.body, /badge-revoked/);
  assert.equal((await t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization: `Bearer ${token}` } })).statusCode, 401);
});

test('the account tab shows the profile and workspaces', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  const res = await web.get('/account');
  assert.equal(res.statusCode, 200);
  assert.ok(res.body.includes(email));
  assert.match(res.body, /Personal <code>wsp_/);
});
