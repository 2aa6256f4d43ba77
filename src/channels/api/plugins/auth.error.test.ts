import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { formatApiKey } from '../../../domain/api-key.ts';
import { randomBase62 } from '../../../domain/ids.ts';
import { API, startTestApp, withoutRequestId, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

/** Each cause of a 401, as the Authorization header (or none) that produces it. */
async function unauthorizedCauses(): Promise<Array<[string, string | undefined]>> {
  const { keys } = t.runtime.services;
  const revoked = await t.user();
  await keys.revoke(revoked.id, revoked.keyId);
  const inactive = await t.user();
  await keys.setEnabled(inactive.keyId, false);
  const expired = await t.user();
  await t.runtime.store.db.updateTable('api_keys').set({ expires_at: new Date(Date.now() - 1000).toISOString() })
    .where('id', '=', expired.keyId).execute();
  const live = await t.user();
  return [
    ['missing', undefined],
    ['empty', ''],
    ['malformed: not a key', 'Bearer not-a-key'],
    ['malformed: another scheme', `Basic ${Buffer.from('user:pass').toString('base64')}`],
    ['malformed: key without the scheme', live.key],
    ['malformed: underscore in the secret', `Bearer ${live.key}_extra`],
    ['malformed: absurdly long', `Bearer ak_${'a'.repeat(500)}_${'b'.repeat(500)}`],
    ['unknown key id', `Bearer ${formatApiKey(randomBase62(16), randomBase62(43))}`],
    ['wrong secret', `Bearer ${formatApiKey(live.keyId, randomBase62(43))}`],
    ['revoked', revoked.auth.authorization],
    ['expired', expired.auth.authorization],
    ['inactive', inactive.auth.authorization],
  ];
}

test('every cause of a 401 gives one identical problem body and WWW-Authenticate: Bearer', async () => {
  const bodies = new Map<string, Record<string, unknown>>();
  for (const [cause, authorization] of await unauthorizedCauses()) {
    const res = await t.inject({
      method: 'GET', url: `${API}/agents`, headers: authorization === undefined ? {} : { authorization },
    });
    assert.equal(res.statusCode, 401, cause);
    assert.match(String(res.headers['www-authenticate']), /^Bearer\b/, cause);
    assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8', cause);
    assert.equal(res.headers['ratelimit'], undefined, `${cause}: a 401 reveals no quota`);
    const body = res.json();
    assert.equal(body.code, 'unauthorized', cause);
    assert.equal(body.request_id, res.headers['x-request-id'], cause);
    bodies.set(cause, withoutRequestId(body));
  }
  const [first, ...others] = [...bodies.values()];
  for (const [cause, body] of bodies) assert.deepEqual(body, first, `${cause} differs from the others`);
  assert.equal(others.length, bodies.size - 1);
  assert.deepEqual(Object.keys(first!).sort(), ['code', 'detail', 'status', 'title', 'type']);
});

test('a 401 comes before the body is looked at: a bad body with no key is still 401', async () => {
  const res = await t.inject({
    method: 'POST', url: `${API}/agents`, headers: { 'content-type': 'application/json' }, payload: '{not json',
  });
  assert.equal(res.statusCode, 401);
  assert.equal(res.json().code, 'unauthorized');
});
