import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';
import { WebClient } from '../../../testing/web-client.ts';
import { REVOKED_KEYS_SHOWN } from './keys.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

/** A person signed up through the web app, and their account (to make keys for them directly). */
async function signedUpUser() {
  const web = new WebClient(t);
  const user = (await t.runtime.services.accounts.findByEmail(await web.signup()))!;
  return { web, user };
}

const secretOf = (body: string) => /id="new-key"[^>]*>.*?<code>(ak_[A-Za-z0-9]+_[A-Za-z0-9]+)<\/code>/.exec(body)?.[1];

test('the create form shows the defaults', async () => {
  const web = new WebClient(t);
  await web.signup();
  const res = await web.get('/account/keys');
  assert.equal(res.statusCode, 200);
  assert.match(res.body, /<label for="f-label">Label<\/label>/);
  assert.match(res.body, /Default 60; at most 10000\./);
  assert.match(res.body, /Default: never expires/);
  // The defaults are said in the hints; a placeholder ("60", "never") would look like a value filled in.
  assert.doesNotMatch(res.body, /placeholder=/);
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
  // The copy button needs the script: hidden until it runs (app.js shows it).
  assert.match(shown.body, /<button type="button" class="btn" data-copy="#new-key code" hidden>Copy<span class="sr-only"> the key<\/span><\/button>/);
  assert.match(shown.body, /role="status" data-copy-status>/);
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

test('invalid input is shown next to the field, in sentences naming it, and nothing is created', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.get('/account/keys');
  const error = (body: string, name: string) => new RegExp(`id="f-${name}-error">([^<]*)</p>`).exec(body)?.[1];
  const res = await web.post('/account/keys', { label: '  ', rate_limit: 'lots', expires_in_days: '0' });
  assert.equal(res.statusCode, 422);
  assert.equal(error(res.body, 'label'), 'Label is required, so that you can tell your keys apart.');
  assert.equal(error(res.body, 'rate_limit'), 'Rate limit must be a whole number of requests per minute from 1 to 10000, or empty for the default (60).');
  assert.equal(error(res.body, 'expires_in_days'), 'Expiry must be a whole number of days from 1 to 3650, or empty for a key that never expires.');
  assert.match(res.body, /aria-invalid="true"/);
  assert.match(res.body, /<title>Error: API keys · agent-channel<\/title>/);
  const tooBig = await web.post('/account/keys', { label: 'x'.repeat(101), rate_limit: '99999999', expires_in_days: '3651' });
  assert.equal(tooBig.statusCode, 422);
  assert.equal(error(tooBig.body, 'label'), 'Label must be at most 100 characters.');
  assert.match(error(tooBig.body, 'rate_limit') ?? '', /^Rate limit must be a whole number/);
  assert.match(error(tooBig.body, 'expires_in_days') ?? '', /^Expiry must be a whole number of days from 1 to 3650/);
  assert.doesNotMatch(tooBig.body, /Too big|Too small|expected (string|number)|Invalid input/, 'no validator fragments');
  assert.match(tooBig.body, /value="x{101}"/, 'the form keeps what was typed');
  // 100 characters after trimming is fine.
  assert.equal((await web.post('/account/keys', { label: `  ${'y'.repeat(100)}  ` })).statusCode, 303);
  const user = await t.runtime.services.accounts.findByEmail(email);
  assert.deepEqual((await t.runtime.services.keys.list(user!.id)).map((k) => k.label), ['y'.repeat(100)]);
});

test('every key status shows: active, inactive, expired, revoked; and when a key was last used', async () => {
  const { web, user } = await signedUpUser();
  const { keys } = t.runtime.services;
  const used = await keys.create(user.id, { label: 'used key' });
  const inactive = (await keys.create(user.id, { label: 'paused key' })).key;
  await keys.setEnabled(inactive.key_id, false);
  const expired = (await keys.create(user.id, { label: 'old key', expires_in_days: 1 })).key;
  await t.runtime.store.db.updateTable('api_keys').set({ expires_at: '2020-01-02T03:04:05.000Z' }).where('id', '=', expired.key_id).execute();
  const revoked = (await keys.create(user.id, { label: 'gone key' })).key;
  await keys.revoke(user.id, revoked.key_id);
  assert.equal((await t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization: `Bearer ${used.token}` } })).statusCode, 200);
  await keys.settled();
  const lastUsed = (await keys.list(user.id)).find((k) => k.key_id === used.key.key_id)!.last_used_at!;

  const page = await web.get('/account/keys');
  const row = (id: string) => new RegExp(`<tr data-key-id="${id}">([\\s\\S]*?)</tr>`).exec(page.body)?.[1] ?? '';
  assert.match(row(used.key.key_id), /<span class="badge badge-active">active<\/span>/);
  assert.match(row(inactive.key_id), /<span class="badge badge-inactive">inactive<\/span>/);
  assert.match(row(expired.key_id), /<span class="badge badge-expired">expired<\/span>/);
  assert.match(row(expired.key_id), /<td data-label="Expires"><time datetime="2020-01-02T03:04:05.000Z">2020-01-02 03:04\u00a0UTC<\/time>/);
  assert.match(row(revoked.key_id), /<span class="badge badge-revoked">revoked<\/span>/);
  assert.doesNotMatch(row(revoked.key_id), /Revoke/, 'a revoked key offers no revoke');
  const shown = `${lastUsed.replace('T', ' ').slice(0, 16)}\u00a0UTC`;
  assert.match(row(used.key.key_id), new RegExp(`<td data-label="Last used"><time datetime="${lastUsed}">${shown}</time></td>`));
  assert.match(row(inactive.key_id), /<td data-label="Last used"><span class="muted">never<\/span><\/td>/);
  assert.match(page.body, /data-inactive-note>An <strong>inactive<\/strong> key was disabled by an operator/, 'what inactive means, and who can undo it');
  await keys.setEnabled(inactive.key_id, true);
  assert.doesNotMatch((await web.get('/account/keys')).body, /data-inactive-note/, 'said only when a key is inactive');
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
  assert.match(confirm.body, /<h1>Revoke “to revoke”\?<\/h1>/);
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

test('the revoke page says what revoking changes for an expired or a disabled key, and that a revoked one is revoked', async () => {
  const { web, user } = await signedUpUser();
  const { keys } = t.runtime.services;
  const page = async (keyId: string) => (await web.get(`/account/keys/${keyId}/revoke`)).body;

  const expired = (await keys.create(user.id, { label: 'old key', expires_in_days: 1 })).key;
  await t.runtime.store.db.updateTable('api_keys').set({ expires_at: '2026-01-02T03:04:00.000Z' }).where('id', '=', expired.key_id).execute();
  const expiredPage = await page(expired.key_id);
  assert.match(expiredPage, /<h1>Revoke “old key”\?<\/h1>/);
  assert.match(expiredPage, /already expired on <time datetime="2026-01-02T03:04:00.000Z">2026-01-02 03:04\u00a0UTC<\/time>: requests made with it already get/);
  assert.doesNotMatch(expiredPage, /will stop working/);

  const disabled = (await keys.create(user.id, { label: 'paused key' })).key;
  await keys.setEnabled(disabled.key_id, false);
  const disabledPage = await page(disabled.key_id);
  assert.match(disabledPage, /is disabled by an operator: requests made with it already get/);
  assert.match(disabledPage, /Once revoked, it can never be enabled again/);
  assert.doesNotMatch(disabledPage, /will stop working/);

  const gone = (await keys.create(user.id, { label: 'typed' })).key;
  await keys.revoke(user.id, gone.key_id);
  const revokedPage = await web.get(`/account/keys/${gone.key_id}/revoke`);
  assert.match(revokedPage.body, /<title>Key revoked · agent-channel<\/title>/);
  assert.match(revokedPage.body, /<h1>“typed” is revoked<\/h1>/);
  assert.doesNotMatch(revokedPage.body, /Revoke “typed”\?/);
  assert.match(revokedPage.body, /was revoked on <time [^>]+>[^<]+<\/time>: it can never be used again/);
  assert.doesNotMatch(revokedPage.body, />Revoke key</, 'nothing left to do but go back');
});

test('the page lists every key still in use, and only the most recently revoked ones; it says how many it leaves out', async () => {
  const { web, user } = await signedUpUser();
  const { keys } = t.runtime.services;
  const live = await keys.create(user.id, { label: 'still in use' });
  const revokedIds: string[] = [];
  for (let i = 0; i < REVOKED_KEYS_SHOWN + 3; i++) {
    const { key } = await keys.create(user.id, { label: `old ${i}` });
    await keys.revoke(user.id, key.key_id);
    revokedIds.push(key.key_id);
  }
  // Revoked a second apart, in the order made, except the first one made: revoked last of all.
  const revokedAt = (seconds: number) => new Date(Date.UTC(2026, 0, 1) + seconds * 1000).toISOString();
  for (const [i, id] of revokedIds.entries()) {
    await t.runtime.store.db.updateTable('api_keys').set({ revoked_at: revokedAt(i === 0 ? 1000 : i) }).where('id', '=', id).execute();
  }

  const page = (await web.get('/account/keys')).body;
  const rows = [...page.matchAll(/<tr data-key-id="([A-Za-z0-9]+)">/g)].map((m) => m[1]);
  assert.ok(rows.includes(live.key.key_id), 'a key in use is always listed');
  assert.equal(rows.filter((id) => revokedIds.includes(id!)).length, REVOKED_KEYS_SHOWN);
  assert.ok(rows.includes(revokedIds[0]), 'the most recently revoked is listed, however old the key');
  assert.ok(!rows.includes(revokedIds[1]) && !rows.includes(revokedIds[2]) && !rows.includes(revokedIds[3]), 'the longest revoked are left out');
  assert.match(page, /3 older revoked keys are not shown/);
});

test('the account tab shows the profile and workspaces', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  const res = await web.get('/account');
  assert.equal(res.statusCode, 200);
  assert.ok(res.body.includes(email));
  assert.match(res.body, /Personal <code>wsp_/);
});
