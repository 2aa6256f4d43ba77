import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Sealer } from './flash.ts';

const key = randomBytes(32);

test('a sealed value opens for the same purpose and user, within its time', () => {
  const sealer = new Sealer({ key });
  const sealed = sealer.seal('new-key', 'usr_a', 'ak_id_secret', 60_000);
  assert.match(sealed, /^[A-Za-z0-9_-]+$/, 'cookie-safe');
  assert.ok(!sealed.includes('secret') && !Buffer.from(sealed, 'base64url').toString('latin1').includes('secret'), 'unreadable');
  assert.equal(sealer.open('new-key', 'usr_a', sealed), 'ak_id_secret');
  assert.deepEqual(sealer.open('x', 'usr_b', sealer.seal('x', 'usr_b', { a: [1, 'b'] }, 1000)), { a: [1, 'b'] });
  assert.notEqual(sealer.seal('new-key', 'usr_a', 'same', 1000), sealer.seal('new-key', 'usr_a', 'same', 1000), 'a fresh IV each time');
});

test('it does not open for another user, another purpose, another key, or after its time', () => {
  let now = 1_000_000;
  const sealer = new Sealer({ key, now: () => now });
  const sealed = sealer.seal('new-key', 'usr_a', 'ak_id_secret', 120_000);
  assert.equal(sealer.open('new-key', 'usr_b', sealed), null, 'bound to the user');
  assert.equal(sealer.open('inbox-refused', 'usr_a', sealed), null, 'bound to the purpose');
  const otherKey = randomBytes(32);
  assert.equal(new Sealer({ key: otherKey, now: () => now }).open('new-key', 'usr_a', sealed), null, 'another key does not open it');
  assert.equal(new Sealer({ key, now: () => now }).open('new-key', 'usr_a', sealed), 'ak_id_secret', 'the same key does, on any instance');
  now += 119_999;
  assert.equal(sealer.open('new-key', 'usr_a', sealed), 'ak_id_secret');
  now += 1;
  assert.equal(sealer.open('new-key', 'usr_a', sealed), null, 'ran out');
});

test('tampered, truncated or foreign values give null, never an exception', () => {
  const sealer = new Sealer({ key });
  const sealed = sealer.seal('p', 'u', 'value', 60_000);
  const raw = Buffer.from(sealed, 'base64url');
  for (const index of [0, 12, 20, 28, raw.length - 1]) {
    const flipped = Buffer.from(raw);
    flipped[index] = flipped[index]! ^ 1;
    assert.equal(sealer.open('p', 'u', flipped.toString('base64url')), null, `byte ${index}`);
  }
  for (const bad of [undefined, '', 'abc', sealed.slice(0, 30), `${sealed}!`, 'A'.repeat(9000), 'ak_id_secret']) {
    assert.equal(sealer.open('p', 'u', bad), null, String(bad).slice(0, 20));
  }
});
