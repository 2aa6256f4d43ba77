import assert from 'node:assert/strict';
import { randomBytes, scryptSync } from 'node:crypto';
import { test } from 'node:test';
import { hashPassword, scryptMaxmem, scryptParamsAllowed, verifyPassword } from './password.ts';

test('the default hash is scrypt with N=2^17, r=8, p=1, as the stored string says', async () => {
  const stored = await hashPassword('correct horse battery');
  const [scheme, costLog2, r, p, salt, hash] = stored.split('$');
  assert.equal(scheme, 'scrypt');
  assert.equal(costLog2, '17');
  assert.equal(r, '8');
  assert.equal(p, '1');
  assert.equal(Buffer.from(salt!, 'base64').length, 16);
  assert.equal(Buffer.from(hash!, 'base64').length, 32);
  assert.equal(await verifyPassword('correct horse battery', stored), true);
  assert.equal(await verifyPassword('correct horse batterY', stored), false);
});

test('two hashes of one password differ (random salt); a wrong password fails', async () => {
  const a = await hashPassword('same password', 10);
  const b = await hashPassword('same password', 10);
  assert.notEqual(a, b);
  assert.equal(await verifyPassword('same password', a), true);
  assert.equal(await verifyPassword('other password', a), false);
  assert.equal(await verifyPassword('', a), false);
});

test('a stored hash with other parameters still verifies', async () => {
  // As an older release (or another cost setting) would have stored it: N=2^12, r=4, p=2.
  const salt = randomBytes(16);
  const N = 2 ** 12;
  const hash = scryptSync('an old password', salt, 32, { N, r: 4, p: 2, maxmem: scryptMaxmem(N, 4, 2) });
  const stored = `scrypt$12$4$2$${salt.toString('base64')}$${hash.toString('base64')}`;
  assert.equal(await verifyPassword('an old password', stored), true);
  assert.equal(await verifyPassword('a new password', stored), false);
});

test('a higher cost (SCRYPT_COST_LOG2=18) hashes and verifies: maxmem follows the parameters', async () => {
  // 2^18 · 8 · 128 bytes = 256 MiB for V alone: more than a fixed 256 MiB maxmem allows.
  assert.ok(scryptMaxmem(2 ** 20, 8, 1) > 1024 * 1024 * 1024, 'cost 20 gets the 1 GiB it needs');
  const stored = await hashPassword('expensive password', 18);
  assert.match(stored, /^scrypt\$18\$8\$1\$/);
  assert.equal(await verifyPassword('expensive password', stored), true);
});

test('a malformed or absurd stored hash does not verify (and does not throw)', async () => {
  const good = await hashPassword('pw', 10);
  const [, , , , salt, hash] = good.split('$');
  for (const stored of ['', 'bcrypt$x', `scrypt$40$8$1$${salt}$${hash}`, `scrypt$10$0$1$${salt}$${hash}`, `scrypt$ten$8$1$${salt}$${hash}`, `scrypt$10$8$1$${salt}$`]) {
    assert.equal(await verifyPassword('pw', stored), false, stored);
  }
});

test('a stored hash asking for more memory than the highest cost setting is refused without hashing', async () => {
  const good = await hashPassword('pw', 10);
  const [, , , , salt, hash] = good.split('$');
  // The highest cost setting (SCRYPT_COST_LOG2=20, r=8, p=1) is allowed, at the edge of the ceiling.
  assert.equal(scryptParamsAllowed(20, 8, 1), true);
  assert.equal(scryptParamsAllowed(10, 8, 1), true);
  // N=2^22, r=32, p=16: each within a bound of its own, together about 17 GiB. N=2^20, r=8, p=2:
  // just over what cost 20 needs.
  for (const [costLog2, r, p] of [[22, 32, 16], [20, 8, 2], [21, 8, 1], [16, 1024, 1], [10, 8, 100_000_000], [17, 1, 1], [0, 8, 1], [10, 0, 1]]) {
    assert.equal(scryptParamsAllowed(costLog2!, r!, p!), false, `${costLog2} ${r} ${p}`);
  }
  // Hashing with these would take seconds to minutes, or fail to get the memory: refused first.
  for (const params of ['22$32$16', '20$8$2', '21$8$1', '16$1024$1', '10$8$100000000']) {
    assert.equal(await verifyPassword('pw', `scrypt$${params}$${salt}$${hash}`), false, params);
  }
  // N ≥ 2^(16·r) is what scrypt itself refuses (it throws): such a hash matches nothing.
  assert.equal(await verifyPassword('pw', `scrypt$17$1$1$${salt}$${hash}`), false);
});
