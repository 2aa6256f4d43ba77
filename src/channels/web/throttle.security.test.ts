/** The log-in throttle under floods: memory stays bounded, and what matters is still counted. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clientOf, keyOf, LoginThrottle } from './throttle.ts';

test('a flood of made-up accounts and addresses is capped: the least recently counted are forgotten first', () => {
  const throttle = new LoginThrottle({ maxKeys: 100 });
  const now = Date.now();
  // An account with four failures, counted again (so most recently) just before the flood.
  for (let i = 0; i < 3; i++) throttle.beginLogin('kept@example.test', `192.0.2.${i}`, now - 1000);
  for (let i = 0; i < 40; i++) throttle.beginLogin(`early-${i}@example.test`, `198.51.100.${i}`, now - 900);
  throttle.beginLogin('kept@example.test', '192.0.2.10', now - 800);
  for (let i = 0; i < 30; i++) throttle.beginLogin(`made-up-${i}@example.test`, `198.18.0.${i}`, now);
  assert.ok(throttle.keysHeld <= 200, `${throttle.keysHeld} keys`);
  // Its fifth attempt goes ahead and its sixth waits: its count survived the flood. An early key did not.
  assert.ok('attempt' in throttle.beginLogin('kept@example.test', '203.0.113.1', now + 1));
  assert.ok('retryAfter' in throttle.beginLogin('kept@example.test', '203.0.113.2', now + 2));
  for (let i = 0; i < 5; i++) assert.ok('attempt' in throttle.beginLogin('early-0@example.test', `203.0.113.${10 + i}`, now + 3), `early attempt ${i + 1}`);
});

test('a locked account stays locked however many new accounts and addresses come after it', () => {
  const throttle = new LoginThrottle({ maxKeys: 100 });
  const now = Date.now();
  for (let i = 0; i < 5; i++) throttle.beginLogin('victim@example.test', `192.0.2.${i}`, now);
  assert.ok('retryAfter' in throttle.beginLogin('victim@example.test', '192.0.2.50', now));
  // 5,000 made-up accounts from 5,000 clients (IPv6 /64s are cheap): far past the cap.
  for (let i = 0; i < 5000; i++) throttle.beginLogin(`flood-${i}@example.test`, `2001:db8:${i.toString(16)}::1`, now + 1);
  assert.ok(throttle.keysHeld <= 200, `${throttle.keysHeld} keys`);
  assert.ok('retryAfter' in throttle.beginLogin('victim@example.test', '192.0.2.51', now + 2), 'still locked');
});

test('keys are of one size whatever a client sends (a megabyte of email is not kept)', () => {
  assert.equal(keyOf('a', 'x'.repeat(1_000_000)).length, keyOf('a', 'a@b.c').length);
  assert.notEqual(keyOf('a', 'a@example.test'), keyOf('i', 'a@example.test'), 'accounts and addresses never share a count');
  const throttle = new LoginThrottle();
  for (let i = 0; i < 5; i++) throttle.beginLogin(`${'y'.repeat(1_000_000)}@example.test`, '192.0.2.1', Date.now());
  assert.ok('retryAfter' in throttle.beginLogin(`${'y'.repeat(1_000_000)}@example.test`, '192.0.2.2', Date.now()), 'still counted per account');
});

test('accounts and addresses idle for a whole window are dropped by the next sweep', () => {
  const throttle = new LoginThrottle();
  const start = 1_000_000_000_000;
  for (let i = 0; i < 10; i++) throttle.beginLogin(`old-${i}@example.test`, `192.0.2.${i}`, start);
  assert.equal(throttle.keysHeld, 20);
  throttle.beginLogin('new@example.test', '192.0.2.200', start + 16 * 60_000);
  assert.equal(throttle.keysHeld, 2, 'only the new account and address are left');
});

test('an IPv6 client is its /64: its addresses share one budget; an IPv4-mapped address is its IPv4 one', () => {
  assert.equal(clientOf('192.0.2.1'), '192.0.2.1');
  assert.equal(clientOf('::ffff:192.0.2.9'), '192.0.2.9');
  for (const ip of ['2001:db8::1', '2001:db8:0:0:ffff::7', '2001:0db8:0000:0000:0001::', '2001:db8::192.0.2.1', '2001:db8::1%eth0']) {
    assert.equal(clientOf(ip), '2001:db8:0:0::/64', ip);
  }
  assert.equal(clientOf('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  assert.equal(clientOf('::1'), '0:0:0:0::/64');
  const throttle = new LoginThrottle({ perIp: 30 });
  const now = Date.now();
  for (let i = 0; i < 30; i++) assert.ok('attempt' in throttle.beginLogin(`spray-${i}@example.test`, `2001:db8::${(i + 1).toString(16)}`, now));
  assert.ok('retryAfter' in throttle.beginLogin('spray-30@example.test', '2001:db8::ffff:1', now), 'another address of the same /64');
  assert.ok('attempt' in throttle.beginLogin('spray-30@example.test', '2001:db8:0:1::1', now), 'the next /64 is another client');
  // Sign-ups too.
  for (let i = 0; i < 10; i++) assert.equal(throttle.beginSignup(`2001:db8:5::${i + 1}`, now), 0);
  assert.ok(throttle.beginSignup('2001:db8:5::ff', now) > 0);
});
