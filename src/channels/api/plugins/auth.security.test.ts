import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { formatApiKey } from '../../../domain/api-key.ts';
import { randomBase62 } from '../../../domain/ids.ts';
import { API, startTestApp, type TestApp, type TestUser } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const listAgents = (authorization: string) =>
  t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization } });

const setExpiresAt = (keyId: string, at: Date) =>
  t.runtime.store.db.updateTable('api_keys').set({ expires_at: at.toISOString() }).where('id', '=', keyId).execute();

test('revocation takes effect on the very next request, and for good', async () => {
  const u = await t.user();
  assert.equal((await listAgents(u.auth.authorization)).statusCode, 200);
  await t.runtime.services.keys.revoke(u.id, u.keyId);
  assert.equal((await listAgents(u.auth.authorization)).statusCode, 401);
  assert.equal(await t.runtime.services.keys.setEnabled(u.keyId, true), 'revoked', 'enabling changes nothing');
  assert.equal((await listAgents(u.auth.authorization)).statusCode, 401);
});

test('a disabled key is refused until it is enabled again', async () => {
  const u = await t.user();
  await t.runtime.services.keys.setEnabled(u.keyId, false);
  assert.equal((await listAgents(u.auth.authorization)).statusCode, 401);
  await t.runtime.services.keys.setEnabled(u.keyId, true);
  assert.equal((await listAgents(u.auth.authorization)).statusCode, 200);
});

test('a key is refused from the moment its expiry passes, and cannot be enabled again', async () => {
  const u = await t.user();
  // Before the key's first use: time passing alone (no write in between) must turn it away.
  const expiresAt = t.runtime.store.clock.now() + 1500;
  await setExpiresAt(u.keyId, new Date(expiresAt));
  assert.equal((await listAgents(u.auth.authorization)).statusCode, 200);
  await new Promise((resolve) => setTimeout(resolve, expiresAt - t.runtime.store.clock.now() + 20));
  assert.equal((await listAgents(u.auth.authorization)).statusCode, 401);
  assert.equal(await t.runtime.services.keys.setEnabled(u.keyId, true), 'expired', 'enabling changes nothing');
  assert.equal((await listAgents(u.auth.authorization)).statusCode, 401);
});

/** The RateLimit header's remaining count after one more authenticated request. */
async function remainingAfterOneRequest(u: TestUser): Promise<number> {
  const res = await listAgents(u.auth.authorization);
  assert.equal(res.statusCode, 200);
  return Number(/r=(\d+)/.exec(String(res.headers['ratelimit']))![1]);
}

test('a 401 never counts against the quota of the key it names', async () => {
  const u = await t.user({ rateLimit: 3 });
  const wrongSecret = `Bearer ${formatApiKey(u.keyId, randomBase62(43))}`;
  for (let i = 0; i < 5; i++) assert.equal((await listAgents(wrongSecret)).statusCode, 401);
  await t.runtime.services.keys.setEnabled(u.keyId, false);
  for (let i = 0; i < 5; i++) assert.equal((await listAgents(u.auth.authorization)).statusCode, 401);
  await t.runtime.services.keys.setEnabled(u.keyId, true);
  assert.equal(await remainingAfterOneRequest(u), 2);
});

test('the key fixes the account: one key never reaches another account\'s key quota', async () => {
  const a = await t.user({ rateLimit: 2 });
  const b = await t.user({ rateLimit: 2 });
  await listAgents(a.auth.authorization);
  await listAgents(a.auth.authorization);
  assert.equal((await listAgents(a.auth.authorization)).statusCode, 429);
  assert.equal(await remainingAfterOneRequest(b), 1);
});

test('two Authorization lines in one request name no key: the one 401, whichever comes first, and no quota is touched', async () => {
  const u = await t.user({ rateLimit: 5 });
  const other = await t.user();
  const single = await listAgents(u.auth.authorization);
  assert.equal(single.statusCode, 200);
  // Node keeps only the first line; a proxy in front may have judged the other one.
  for (const lines of [[u.auth.authorization, other.auth.authorization], [u.auth.authorization, u.auth.authorization], ['Bearer nonsense', u.auth.authorization]]) {
    const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization: lines } as unknown as Record<string, string> });
    assert.equal(res.statusCode, 401, lines.join(' | '));
    assert.equal(res.json().code, 'unauthorized');
    assert.equal(res.headers['www-authenticate'], 'Bearer');
    assert.equal(res.headers.ratelimit, undefined);
  }
  assert.equal(await remainingAfterOneRequest(u), 3, 'only the two single-key requests counted');
});

test('a header whose value happens to be "Authorization" is no second Authorization line', async () => {
  const u = await t.user();
  // As a client may send it, e.g. naming the headers a response varies on.
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: { ...u.auth, 'x-varies-on': 'Authorization' } });
  assert.equal(res.statusCode, 200, res.body);
});
