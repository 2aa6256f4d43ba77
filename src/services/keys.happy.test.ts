import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp } from '../testing/harness.ts';
import { KeysService } from './keys.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const keysWith = (overrides: Partial<ConstructorParameters<typeof KeysService>[0]> = {}) =>
  new KeysService({ store: t.runtime.store, keyCache: t.runtime.services.requestCache.keys, defaultRateLimitPerMinute: 60, maxRateLimitPerMinute: 10_000, ...overrides });

test('create returns the whole key once, and a view of it', async () => {
  const u = await t.user();
  const { key, token } = await t.runtime.services.keys.create(u.id, { label: '  CI runner  ' });
  assert.match(token, /^ak_[A-Za-z0-9]+_[A-Za-z0-9]+$/);
  assert.ok(token.startsWith(`ak_${key.key_id}_`));
  assert.equal(key.label, 'CI runner');
  assert.equal(key.status, 'active');
  assert.equal(key.rate_limit, 60);
  assert.equal(key.expires_at, null);
  assert.equal(key.last_used_at, null);
  const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.statusCode, 200);
});

test('the rate limit may be anything from 1 to the server maximum, and is fixed into the key', async () => {
  const u = await t.user();
  const one = await keysWith().create(u.id, { label: 'one', rate_limit: 1 });
  const max = await keysWith().create(u.id, { label: 'max', rate_limit: 10_000 });
  assert.equal(one.key.rate_limit, 1);
  assert.equal(max.key.rate_limit, 10_000);
  const raised = await keysWith({ maxRateLimitPerMinute: 1_000_000 }).create(u.id, { label: 'load test', rate_limit: 500_000 });
  assert.equal(raised.key.rate_limit, 500_000);

  // The default in force at creation stays with the key when the server's default changes.
  const byDefault = await keysWith({ defaultRateLimitPerMinute: 60 }).create(u.id, { label: 'default' });
  const later = keysWith({ defaultRateLimitPerMinute: 5 });
  assert.equal((await later.authenticate(`Bearer ${byDefault.token}`))!.rateLimit, 60);
  assert.equal((await later.list(u.id)).find((k) => k.key_id === byDefault.key.key_id)!.rate_limit, 60);
});

test('an expiry in days sets expires_at that many days ahead', async () => {
  const u = await t.user();
  // By the store's clock, which key expiry is timed by (on PostgreSQL the database server's, to
  // within the measured offset: not this process's Date.now() to the millisecond).
  const { clock } = t.runtime.store;
  const before = Math.floor(clock.now()); // (stored to the millisecond)
  const { key } = await t.runtime.services.keys.create(u.id, { label: 'temp', expires_in_days: 30 });
  const expires = Date.parse(key.expires_at!);
  assert.ok(expires >= before + 30 * 86_400_000 && expires <= clock.now() + 30 * 86_400_000, `${key.expires_at} after ${new Date(before).toISOString()}`);
});

test('at the very millisecond of its expiry a key is expired everywhere: refused, listed as expired, no longer counted active', async () => {
  const u = await t.user(); // comes with one key that never expires
  const { key, token } = await t.runtime.services.keys.create(u.id, { label: 'expiring', expires_in_days: 1 });
  const expiry = Date.parse(key.expires_at!);
  // The store's clock, which key expiry is timed by, standing at a chosen instant.
  const keysAt = (now: number) => keysWith({ store: { ...t.runtime.store, clock: { now: () => now } } });
  const seenAt = async (now: number) => {
    const keys = keysAt(now);
    return {
      authenticated: (await keys.authenticate(`Bearer ${token}`)) !== null,
      status: (await keys.find(u.id, key.key_id))!.status,
      active: await keys.countActive(u.id),
    };
  };
  assert.deepEqual(await seenAt(expiry - 1), { authenticated: true, status: 'active', active: 2 });
  assert.deepEqual(await seenAt(expiry), { authenticated: false, status: 'expired', active: 1 });
});

test('list shows the creator\'s keys, newest first, with their current status', async () => {
  const u = await t.user(); // comes with one key, "test"
  const keys = t.runtime.services.keys;
  const revoked = await keys.create(u.id, { label: 'revoked' });
  const inactive = await keys.create(u.id, { label: 'inactive' });
  const expired = await keys.create(u.id, { label: 'expired', expires_in_days: 1 });
  await keys.revoke(u.id, revoked.key.key_id);
  await keys.setEnabled(inactive.key.key_id, false);
  await t.runtime.store.db.updateTable('api_keys').set({ expires_at: new Date(Date.now() - 3_600_000).toISOString() }) // well past, by any instance's clock
    .where('id', '=', expired.key.key_id).execute();
  const listed = await keys.list(u.id);
  // Keys made within one millisecond share created_at, so compare as a set, then check the order.
  assert.deepEqual(Object.fromEntries(listed.map((k) => [k.label, k.status])), {
    expired: 'expired', inactive: 'inactive', revoked: 'revoked', test: 'active',
  });
  assert.equal(new Set(listed.map((k) => k.key_id)).size, 4);
  for (let i = 1; i < listed.length; i++) assert.ok(listed[i - 1]!.created_at >= listed[i]!.created_at);
  assert.ok(listed.find((k) => k.label === 'revoked')!.revoked_at);
});

test('creation, revocation, disabling and enabling each leave an audit row', async () => {
  const u = await t.user();
  const keys = t.runtime.services.keys;
  const a = await keys.create(u.id, { label: 'audited' });
  await keys.setEnabled(a.key.key_id, false);
  await keys.setEnabled(a.key.key_id, false); // no change, no row
  await keys.setEnabled(a.key.key_id, true);
  await keys.revoke(u.id, a.key.key_id);
  await keys.revoke(u.id, a.key.key_id); // already revoked, no row
  const trail = await keys.auditTrail(a.key.key_id);
  assert.deepEqual(trail.map((r) => r.action), ['key.created', 'key.disabled', 'key.enabled', 'key.revoked']);
  assert.equal(trail[0]!.actor_user_id, u.id);
  assert.equal(trail[3]!.actor_user_id, u.id);
  assert.ok(trail.every((r) => !Number.isNaN(Date.parse(r.at))));
  assert.ok(!JSON.stringify(trail).includes(a.token.split('_')[2]!), 'the secret is never in the audit log');
});

test('last_used_at is written on first use, then at most once a minute per key', async () => {
  const u = await t.user();
  const clock = { now: Date.parse('2030-05-01T10:00:00.000Z') };
  const keys = keysWith({ now: () => clock.now });
  const lastUsed = async () => (await keys.list(u.id))[0]!.last_used_at;

  await keys.authenticate(u.auth.authorization);
  await keys.settled();
  assert.equal(await lastUsed(), '2030-05-01T10:00:00.000Z');

  clock.now += 59_000;
  for (let i = 0; i < 10; i++) await keys.authenticate(u.auth.authorization);
  await keys.settled();
  assert.equal(await lastUsed(), '2030-05-01T10:00:00.000Z', 'not written again within the minute');

  clock.now += 1_000;
  await keys.authenticate(u.auth.authorization);
  await keys.settled();
  assert.equal(await lastUsed(), '2030-05-01T10:01:00.000Z');
});

test('countActive counts the keys that work now, as list shows them; find returns one of the user\'s own keys only', async () => {
  const u = await t.user();
  const other = await t.user();
  const { keys } = t.runtime.services;
  const kept = await keys.create(u.id, { label: 'kept' });
  await keys.create(u.id, { label: 'expiring', expires_in_days: 30 });
  const revoked = await keys.create(u.id, { label: 'revoked' });
  await keys.revoke(u.id, revoked.key.key_id);
  const inactive = await keys.create(u.id, { label: 'inactive' });
  await keys.setEnabled(inactive.key.key_id, false);
  const expired = await keys.create(u.id, { label: 'expired', expires_in_days: 1 });
  await t.runtime.store.db.updateTable('api_keys').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where('id', '=', expired.key.key_id).execute();
  await keys.create(other.id, { label: 'someone else\'s' });

  const listed = await keys.list(u.id);
  for (const status of ['expired', 'inactive', 'revoked']) assert.ok(listed.some((k) => k.status === status), status);
  const active = listed.filter((k) => k.status === 'active').length;
  assert.ok(active >= 2, 'kept and expiring (and any key the test user came with)');
  assert.equal(await keys.countActive(u.id), active);
  assert.deepEqual(await keys.find(u.id, kept.key.key_id), listed.find((k) => k.key_id === kept.key.key_id));
  assert.equal(await keys.find(other.id, kept.key.key_id), undefined);
});
