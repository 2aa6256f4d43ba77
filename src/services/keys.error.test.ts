import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, type TestApp } from '../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

const keyCount = async () =>
  Number((await t.runtime.store.db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

const invalidInputs: Array<[string, Record<string, unknown>, string]> = [
  ['no label', {}, 'label'],
  ['a blank label', { label: '   ' }, 'label'],
  ['a label over 100 characters', { label: 'l'.repeat(101) }, 'label'],
  ['a rate limit of 0', { label: 'x', rate_limit: 0 }, 'rate_limit'],
  ['a rate limit over the maximum', { label: 'x', rate_limit: 10_001 }, 'rate_limit'],
  ['a fractional rate limit', { label: 'x', rate_limit: 1.5 }, 'rate_limit'],
  ['a rate limit given as a string', { label: 'x', rate_limit: '60' }, 'rate_limit'],
  ['an expiry of 0 days', { label: 'x', expires_in_days: 0 }, 'expires_in_days'],
  ['a negative expiry', { label: 'x', expires_in_days: -3 }, 'expires_in_days'],
];

for (const [what, input, path] of invalidInputs) {
  test(`create refuses ${what} with validation_failed on ${path}, and stores nothing`, async () => {
    const u = await t.user();
    const before = await keyCount();
    await assert.rejects(t.runtime.services.keys.create(u.id, input as never), (error: { code: string; extra: { errors: Array<{ path: string }> } }) => {
      assert.equal(error.code, 'validation_failed');
      assert.ok(error.extra.errors.some((e) => e.path === path), JSON.stringify(error.extra.errors));
      return true;
    });
    assert.equal(await keyCount(), before);
  });
}

test('revoking a key that does not exist is not_found', async () => {
  const u = await t.user();
  await assert.rejects(t.runtime.services.keys.revoke(u.id, 'NoSuchKey0000000'), { code: 'not_found' });
});

test('enabling or disabling a key that does not exist is not_found', async () => {
  await assert.rejects(t.runtime.services.keys.setEnabled('NoSuchKey0000000', true), { code: 'not_found' });
  await assert.rejects(t.runtime.services.keys.setEnabled('NoSuchKey0000000', false), { code: 'not_found' });
});

test('enabling or disabling a revoked key changes nothing (it stays revoked) and leaves no audit row', async () => {
  const u = await t.user();
  await t.runtime.services.keys.revoke(u.id, u.keyId);
  assert.equal(await t.runtime.services.keys.setEnabled(u.keyId, true), 'revoked');
  assert.equal(await t.runtime.services.keys.setEnabled(u.keyId, false), 'revoked');
  const actions = (await t.runtime.services.keys.auditTrail(u.keyId)).map((r) => r.action);
  assert.deepEqual(actions, ['key.created', 'key.revoked']);
});
