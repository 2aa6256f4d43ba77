/** The log-in throttle under floods: memory stays bounded, and what matters is still counted. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keyOf, LoginThrottle } from './throttle.ts';

test('a flood of made-up accounts and addresses is capped: the least recently counted are forgotten first', () => {
  const throttle = new LoginThrottle({ maxKeys: 100 });
  const now = Date.now();
  for (let i = 0; i < 1000; i++) throttle.beginLogin(`made-up-${i}@example.test`, `198.51.${i >> 8}.${i & 255}`, now);
  assert.equal(throttle.keysHeld, 100);
  // The account being guessed now is counted as always: its sixth attempt in the window waits.
  for (let i = 0; i < 5; i++) assert.ok('attempt' in throttle.beginLogin('target@example.test', `203.0.113.${i}`, now + i));
  assert.ok('retryAfter' in throttle.beginLogin('target@example.test', '203.0.113.99', now + 10));
  assert.ok(throttle.keysHeld <= 100);
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
