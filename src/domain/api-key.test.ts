import assert from 'node:assert/strict';
import { test } from 'node:test';
import { timingSafeEqualCallsDuring } from '../testing/crypto-spy.ts';
import {
  effectiveKeyStatus, formatApiKey, generateApiKey, hashSecret, parseApiKey, parseBearer, secretMatches,
  KEY_ID_LENGTH, SECRET_LENGTH,
} from './api-key.ts';

test('generated keys have the contract\'s shape and at least 256 bits of secret', () => {
  const { keyId, secret, token } = generateApiKey();
  assert.match(token, /^ak_[A-Za-z0-9]+_[A-Za-z0-9]+$/);
  assert.equal(token, formatApiKey(keyId, secret));
  assert.equal(keyId.length, KEY_ID_LENGTH);
  assert.ok(SECRET_LENGTH * Math.log2(62) >= 256);
  assert.deepEqual(parseApiKey(token), { keyId, secret });
  assert.notEqual(generateApiKey().token, token);
});

test('parseBearer accepts only "Bearer ak_<id>_<secret>"', () => {
  const { keyId, secret, token } = generateApiKey();
  assert.deepEqual(parseBearer(`Bearer ${token}`), { keyId, secret });
  assert.deepEqual(parseBearer(`bearer ${token}`), { keyId, secret });
  for (const bad of [undefined, '', token, `Basic ${token}`, `Bearer ${token}_x`, `Bearer ak__${secret}`, `Bearer ${token} extra`, `Bearer ak_${'a'.repeat(400)}_b`]) {
    assert.equal(parseBearer(bad), null, String(bad));
  }
});

test('a right secret matches its digest; a wrong one does not', () => {
  const { secret } = generateApiKey();
  assert.equal(secretMatches(secret, hashSecret(secret)), true);
  assert.equal(secretMatches(`${secret}x`, hashSecret(secret)), false);
});

test('an unknown key id and a wrong secret go through the same constant-time digest comparison', async () => {
  const { secret } = generateApiKey();
  const stored = hashSecret(generateApiKey().secret);
  const unknownId = await timingSafeEqualCallsDuring(() => assert.equal(secretMatches(secret, null), false));
  const wrongSecret = await timingSafeEqualCallsDuring(() => assert.equal(secretMatches(secret, stored), false));
  assert.equal(unknownId.length, 1);
  assert.equal(wrongSecret.length, 1);
  // Same work: two 32-byte SHA-256 digests compared, the presented one first.
  for (const [[presented, expected], label] of [[unknownId[0]!, 'unknown id'], [wrongSecret[0]!, 'wrong secret']] as const) {
    assert.equal(presented.length, 32, label);
    assert.equal(expected.length, 32, label);
    assert.deepEqual(presented, hashSecret(secret), label);
  }
  assert.deepEqual(wrongSecret[0]![1], stored);
});

test('the dummy digest of the unknown-id path never matches, even for a stored digest of the wrong size', async () => {
  const { secret } = generateApiKey();
  assert.equal(secretMatches(secret, Buffer.alloc(5)), false);
  const comparisons = await timingSafeEqualCallsDuring(() => secretMatches(secret, Buffer.alloc(5)));
  assert.equal(comparisons.length, 1, 'still one full comparison');
});

test('a key is expired from the instant its expiry passes; revoked wins over everything', () => {
  const at = new Date('2030-01-01T00:00:00.000Z');
  const key = { status: 'active' as const, expires_at: at.toISOString() };
  assert.equal(effectiveKeyStatus(key, new Date(at.getTime() - 1)), 'active');
  assert.equal(effectiveKeyStatus(key, at), 'expired');
  assert.equal(effectiveKeyStatus({ status: 'inactive', expires_at: null }, at), 'inactive');
  assert.equal(effectiveKeyStatus({ status: 'revoked', expires_at: at.toISOString() }, new Date(at.getTime() + 1)), 'revoked');
});
