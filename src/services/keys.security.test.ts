import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { formatApiKey, hashSecret } from '../domain/api-key.ts';
import { randomBase62 } from '../domain/ids.ts';
import { timingSafeEqualCallsDuring } from '../testing/crypto-spy.ts';
import { API, startTestApp, type TestApp } from '../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const secretOf = (token: string) => token.split('_')[2]!;

test('only the SHA-256 digest of the secret is stored, never the secret', async () => {
  const u = await t.user();
  const row = await t.runtime.store.db.selectFrom('api_keys').selectAll().where('id', '=', u.keyId).executeTakeFirstOrThrow();
  assert.deepEqual(Buffer.from(row.secret_hash), hashSecret(secretOf(u.key)));
  const { secret_hash: _digest, ...rest } = row;
  assert.ok(!JSON.stringify(rest).includes(secretOf(u.key)));
});

test('list never shows a secret or its digest', async () => {
  const u = await t.user();
  const listed = await t.runtime.services.keys.list(u.id);
  const text = JSON.stringify(listed);
  assert.ok(!text.includes(secretOf(u.key)));
  assert.ok(!text.includes(hashSecret(secretOf(u.key)).toString('hex')));
  assert.ok(!text.includes(hashSecret(secretOf(u.key)).toString('base64')));
  for (const key of listed) assert.deepEqual(Object.keys(key).sort(), ['created_at', 'expires_at', 'key_id', 'label', 'last_used_at', 'rate_limit', 'revoked_at', 'status']);
});

test('list shows only the keys the user created', async () => {
  const alice = await t.user();
  const bob = await t.user();
  await t.runtime.services.keys.create(bob.id, { label: 'bob second' });
  assert.deepEqual((await t.runtime.services.keys.list(alice.id)).map((k) => k.key_id), [alice.keyId]);
  assert.ok((await t.runtime.services.keys.list(bob.id)).every((k) => k.key_id !== alice.keyId));
});

test('only the creator can revoke a key: for anyone else it is not_found, and the key keeps working', async () => {
  const owner = await t.user();
  const other = await t.user();
  await assert.rejects(t.runtime.services.keys.revoke(other.id, owner.keyId), { code: 'not_found' });
  const missing = await t.runtime.services.keys.revoke(other.id, 'NoSuchKey0000000').catch((e: Error) => e.message);
  const foreign = await t.runtime.services.keys.revoke(other.id, owner.keyId).catch((e: Error) => e.message);
  assert.equal(foreign, missing, 'another user\'s key reads exactly like a missing one');
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: owner.auth });
  assert.equal(res.statusCode, 200);
  assert.deepEqual((await t.runtime.services.keys.auditTrail(owner.keyId)).map((r) => r.action), ['key.created']);
});

test('authenticate compares digests once, in constant time, whether the key id is unknown or the secret wrong', async () => {
  const u = await t.user();
  const keys = t.runtime.services.keys;
  const unknownId = await timingSafeEqualCallsDuring(async () => {
    assert.equal(await keys.authenticate(`Bearer ${formatApiKey(randomBase62(16), randomBase62(43))}`), null);
  });
  const wrongSecret = await timingSafeEqualCallsDuring(async () => {
    assert.equal(await keys.authenticate(`Bearer ${formatApiKey(u.keyId, randomBase62(43))}`), null);
  });
  assert.equal(unknownId.length, 1);
  assert.equal(wrongSecret.length, 1);
  assert.deepEqual(unknownId.map(([a, b]) => [a.length, b.length]), wrongSecret.map(([a, b]) => [a.length, b.length]));
});
