/** The log-in throttle under floods and across instances: counted once for all, bounded in what it keeps. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openStore, type Store } from '../store/store.ts';
import { startTestApp, type TestApp } from '../testing/harness.ts';
import { createHash } from 'node:crypto';
import { clientOf, LoginThrottle } from './login-throttle.ts';

let t: TestApp;
/** A second connection to the same database: another instance, as far as the throttle can tell. */
let elsewhere: Store;
before(async () => {
  t = await startTestApp();
  elsewhere = await openStore(t.database.url, t.database.pgSchema ? { pgSchema: t.database.pgSchema } : {});
});
after(async () => {
  await elsewhere.close();
  await t.close();
});

let unique = 0;
const email = (what: string) => `${what}-${++unique}@example.test`;
const rows = async () => Number((await t.runtime.store.db.selectFrom('login_attempts').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
const allowed = (result: { retryAfter: number } | { attempt: unknown }) => 'attempt' in result;

test('two instances share one count: five attempts in all per account, however they are spread, parallel ones included', async () => {
  const here = new LoginThrottle(t.runtime.store);
  const there = new LoginThrottle(elsewhere);
  const spread = email('spread');
  for (let i = 0; i < 3; i++) assert.ok(allowed(await here.beginLogin(spread, `192.0.2.${i}`)));
  for (let i = 0; i < 2; i++) assert.ok(allowed(await there.beginLogin(spread, `192.0.2.${10 + i}`)));
  const refused = await there.beginLogin(spread, '192.0.2.20');
  assert.ok('retryAfter' in refused && refused.retryAfter > 14 * 60, JSON.stringify(refused));
  assert.ok(!allowed(await here.beginLogin(spread, '192.0.2.21')));

  // Twenty guesses at once, through both instances on PostgreSQL (SQLite serves one instance; two
  // connections of one process writing at once would wait on each other): five go ahead, no more.
  const parallel = email('parallel');
  const through = (i: number) => (i % 2 && t.runtime.store.dialect === 'postgres' ? there : here);
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => through(i).beginLogin(parallel, `198.51.100.${i}`)));
  assert.equal(results.filter(allowed).length, 5);
});

test('a success forgives its own attempt and the account\'s earlier failures, not the address\'s other attempts', async () => {
  const throttle = new LoginThrottle(t.runtime.store, { perIp: 6 });
  const account = email('forgiven');
  const ip = '203.0.113.77';
  let last;
  for (let i = 0; i < 4; i++) last = await throttle.beginLogin(account, ip);
  assert.ok(last && 'attempt' in last);
  await throttle.succeeded(last.attempt);
  // The account's count starts again (five more); the address kept its three failures (six in all).
  for (let i = 0; i < 3; i++) assert.ok(allowed(await throttle.beginLogin(email('other'), ip)), `attempt ${i + 1} of the address`);
  assert.ok(!allowed(await throttle.beginLogin(account, ip)), 'the address has used its six');
  for (let i = 0; i < 5; i++) assert.ok(allowed(await throttle.beginLogin(account, `203.0.113.${100 + i}`)), `account attempt ${i + 1}`);
});

test('a refused attempt writes nothing: a flood at a locked account keeps no more rows, and the lock holds', async () => {
  const throttle = new LoginThrottle(t.runtime.store);
  const victim = email('victim');
  for (let i = 0; i < 5; i++) await throttle.beginLogin(victim, `192.0.2.${100 + i}`);
  const before = await rows();
  for (let i = 0; i < 300; i++) assert.ok(!allowed(await throttle.beginLogin(victim, `2001:db8:${i.toString(16)}::1`)));
  assert.equal(await rows(), before);
  // Other accounts from other clients come and go; the victim stays locked.
  for (let i = 0; i < 100; i++) await throttle.beginLogin(email('flood'), `2001:db8:f:${i.toString(16)}::1`);
  assert.ok(!allowed(await throttle.beginLogin(victim, '192.0.2.200')), 'still locked');
});

test('what is counted is a digest of one size, whatever a client sends (a megabyte of email is not kept)', async () => {
  const throttle = new LoginThrottle(t.runtime.store);
  assert.equal((await throttle.keyOf('a', 'x'.repeat(1_000_000))).length, (await throttle.keyOf('a', 'a@b.c')).length);
  assert.notEqual(await throttle.keyOf('a', 'a@example.test'), await throttle.keyOf('i', 'a@example.test'), 'accounts and addresses never share a count');
  // Keyed with the deployment's secret: the same on another instance, and not a plain digest that
  // a copy of the table would give back by trying every address.
  assert.equal(await new LoginThrottle(elsewhere).keyOf('i', '192.0.2.1'), await throttle.keyOf('i', '192.0.2.1'));
  assert.notEqual(await throttle.keyOf('i', '192.0.2.1'), `i:${createHash('sha256').update('192.0.2.1').digest('base64url')}`);
  const huge = `${'y'.repeat(1_000_000)}-${++unique}@example.test`;
  for (let i = 0; i < 5; i++) await throttle.beginLogin(huge, `192.0.2.${150 + i}`);
  assert.ok(!allowed(await throttle.beginLogin(huge, '192.0.2.160')), 'still counted per account');
  const longest = await t.runtime.store.db.selectFrom('login_attempts').select('key').orderBy((eb) => eb.fn('length', ['key']), 'desc').limit(1).executeTakeFirstOrThrow();
  assert.ok(longest.key.length < 60, `a kept key is ${longest.key.length} characters`);
});

test('the sweep deletes the attempts out of every window and keeps the others', async () => {
  const throttle = new LoginThrottle(t.runtime.store);
  const start = t.runtime.store.clock.now() + 24 * 3_600_000; // later than anything the other tests wrote
  const locked = email('old');
  for (let i = 0; i < 10; i++) await throttle.beginLogin(i < 5 ? locked : email('old'), `192.0.2.${i}`, start);
  assert.ok(await rows() >= 20);
  // Still in their window: a sweep keeps them all, and the account they locked stays locked.
  const since = async (at: number) => Number((await t.runtime.store.db.selectFrom('login_attempts').select((eb) => eb.fn.countAll().as('n'))
    .where('at', '>=', Math.floor(at)).executeTakeFirstOrThrow()).n);
  await throttle.sweep(start + 15 * 60_000 - 1);
  assert.equal(await since(start), 20, 'nothing in its window is swept');
  assert.ok(!allowed(await throttle.beginLogin(locked, '192.0.2.99', start + 15 * 60_000 - 1)));
  await throttle.beginLogin(email('new'), '192.0.2.201', start + 16 * 60_000);
  await throttle.sweep(start + 16 * 60_000);
  assert.equal(await rows(), 2, 'only the new attempt, counted against its account and its address');
});

test('an account\'s attempts count for exactly the window: refused until its last millisecond, the wait rounded up', async () => {
  const throttle = new LoginThrottle(t.runtime.store);
  const windowMs = 15 * 60_000;
  const start = Math.floor(t.runtime.store.clock.now()) + 48 * 3_600_000; // later than anything the tests before it wrote
  const account = email('edge');
  for (let i = 0; i < 5; i++) assert.ok(allowed(await throttle.beginLogin(account, `192.0.2.${60 + i}`, start)));
  for (const [elapsedMs, retryAfter] of [[1, 900], [500, 900], [1_000, 899], [windowMs - 1_500, 2], [windowMs - 1, 1]] as const) {
    assert.deepEqual(await throttle.beginLogin(account, '192.0.2.70', start + elapsedMs), { retryAfter }, `${elapsedMs} ms after`);
  }
  assert.ok(allowed(await throttle.beginLogin(account, '192.0.2.70', start + windowMs)), 'the five have left the window');
});

test('an IPv6 client is its /64: its addresses share one budget; an IPv4-mapped address is its IPv4 one', async () => {
  assert.equal(clientOf('192.0.2.1'), '192.0.2.1');
  assert.equal(clientOf('::ffff:192.0.2.9'), '192.0.2.9');
  for (const ip of ['2001:db8::1', '2001:db8:0:0:ffff::7', '2001:0db8:0000:0000:0001::', '2001:db8::192.0.2.1', '2001:db8::1%eth0']) {
    assert.equal(clientOf(ip), '2001:db8:0:0::/64', ip);
  }
  assert.equal(clientOf('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  assert.equal(clientOf('::1'), '0:0:0:0::/64');
  const throttle = new LoginThrottle(t.runtime.store, { perIp: 30 });
  for (let i = 0; i < 30; i++) assert.ok(allowed(await throttle.beginLogin(email('spray'), `2001:db8:6::${(i + 1).toString(16)}`)));
  assert.ok(!allowed(await throttle.beginLogin(email('spray'), '2001:db8:6::ffff:1')), 'another address of the same /64');
  assert.ok(allowed(await throttle.beginLogin(email('spray'), '2001:db8:6:1::1')), 'the next /64 is another client');
  // Sign-ups too.
  for (let i = 0; i < 10; i++) assert.equal(await throttle.beginSignup(`2001:db8:5::${i + 1}`), 0);
  assert.ok(await throttle.beginSignup('2001:db8:5::ff') > 0);
});
