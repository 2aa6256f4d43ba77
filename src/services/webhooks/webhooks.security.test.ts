import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Problem } from '../../domain/problems.ts';
import { startTestApp, type TestApp } from '../../testing/harness.ts';
import { WebhookReceiver } from '../../testing/webhook-receiver.ts';
import { WebhookSender } from './sender.ts';
import { isPrivateAddress } from './url-safety.ts';

/** Where webhooks may go (contract §9.5): https and public addresses only, unless the operator allows private ones. */
let t: TestApp;
let receiver: WebhookReceiver;
before(async () => {
  t = await startTestApp(); // WEBHOOK_ALLOW_PRIVATE_URLS unset
  receiver = await WebhookReceiver.start();
});
after(async () => {
  await t.close();
  await receiver.close();
});

async function refusal(url: string): Promise<string> {
  const u = await t.user();
  try {
    await t.runtime.services.webhooks.create(u.id, { url });
  } catch (error) {
    assert.ok(error instanceof Problem && error.code === 'validation_failed', String(error));
    assert.equal((await t.runtime.services.webhooks.list(u.id)).length, 0, 'nothing registered');
    return (error.extra.errors as Array<{ message: string }>)[0]!.message;
  }
  return assert.fail(`${url} was registered`);
}

test('registration refuses http:// and addresses that are loopback, private, link-local (metadata) or unique-local, by literal or by name', async () => {
  assert.equal(await refusal('http://example.com/hook'), 'must be an https:// URL');
  assert.equal(await refusal(receiver.url), 'must be an https:// URL');
  for (const url of ['https://127.0.0.1/hook', 'https://localhost/hook', 'https://[::1]/hook', 'https://10.1.2.3/', 'https://192.168.0.10/',
    'https://172.16.5.4/', 'https://169.254.169.254/latest/meta-data', 'https://[fd00:ec2::254]/', 'https://[fe80::1]/', 'https://0.0.0.0/',
    'https://[::ffff:127.0.0.1]/', 'https://100.64.0.1/']) {
    assert.match(await refusal(url), /must not point to a loopback, private, link-local or unique-local address/, url);
  }
  assert.equal(await refusal('ftp://example.com/'), 'must be an https:// URL');
  assert.equal(await refusal('https://user:pw@example.com/'), 'must not hold a user name or password');
  assert.equal(await refusal(`https://example.com/${'a'.repeat(2100)}`), 'must be at most 2048 characters');
  assert.equal(await refusal('not a url'), 'must be an absolute URL such as https://example.com/webhooks');
});

/** The errors a registration is refused with. */
async function errorsOf(userId: string, input: { url: string; events?: string }): Promise<Array<{ path: string; message: string }>> {
  try {
    await t.runtime.services.webhooks.create(userId, input);
  } catch (error) {
    assert.ok(error instanceof Problem && error.code === 'validation_failed', String(error));
    return error.extra.errors as Array<{ path: string; message: string }>;
  }
  return assert.fail(`${input.url} was registered`);
}

test('what is wrong as written, in the events or past the account\'s limit is refused without a DNS lookup; a name is resolved only when all else is right', async () => {
  // A .invalid name never resolves (RFC 6761): had it been looked up first, the refusal would say that instead.
  assert.equal(await refusal('http://hooks.invalid/hook'), 'must be an https:// URL');
  const u = await t.user();
  assert.deepEqual(await errorsOf(u.id, { url: 'https://hooks.invalid/hook', events: 'turn.exploded' }),
    [{ path: 'events', message: 'unknown event type "turn.exploded": use the types of GET /events' }]);
  for (let i = 0; i < 20; i++) await t.runtime.services.webhooks.create(u.id, { url: `https://8.8.8.8/hook/${i}` });
  assert.deepEqual(await errorsOf(u.id, { url: 'https://hooks.invalid/hook' }),
    [{ path: 'url', message: 'an account has at most 20 webhook endpoints: delete one first' }]);
  assert.deepEqual(await errorsOf((await t.user()).id, { url: 'https://hooks.invalid/hook' }),
    [{ path: 'url', message: 'its host hooks.invalid cannot be resolved' }]);
});

test('unknown event types are refused, saying which', async () => {
  const u = await t.user();
  await assert.rejects(t.runtime.services.webhooks.create(u.id, { url: 'https://8.8.8.8/hook', events: 'turn.completed,turn.exploded' }),
    (error: Problem) => error.code === 'validation_failed' && /unknown event type "turn.exploded"/.test(error.message));
});

test('public addresses are not private; private ones are', () => {
  for (const address of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111']) assert.equal(isPrivateAddress(address), false, address);
  for (const address of ['127.0.0.1', '::1', '10.0.0.1', '169.254.169.254', 'fd00::1', 'fe80::1', '::ffff:10.0.0.1', '::', '224.0.0.1']) {
    assert.equal(isPrivateAddress(address), true, address);
  }
});

test('at delivery, a name that resolves to a private address is refused at the connection (DNS may have changed since registration); nothing reaches it', async () => {
  const sender = new WebhookSender({ allowPrivate: false, maxSocketsPerHost: 1 });
  try {
    const port = new URL(receiver.url).port;
    const attempt = { secret: 'whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=', webhookId: 'evt_1', body: '{}', timestampSeconds: 1 };
    for (const url of [`https://localhost:${port}/hooks`, `https://127.0.0.1:${port}/hooks`, `http://localhost:${port}/hooks`]) {
      const result = await sender.send({ url, ...attempt });
      assert.equal(result.status, null, url);
      assert.match(result.error!, /^refused: /, url);
    }
    assert.equal(receiver.received.length, 0);
  } finally {
    sender.close();
  }
});

test('redirects are not followed: a 3xx is a failed attempt', async () => {
  const sender = new WebhookSender({ allowPrivate: true, maxSocketsPerHost: 1 });
  const target = await WebhookReceiver.start();
  try {
    receiver.answer = () => ({ status: 307 });
    const result = await sender.send({ url: receiver.url, secret: 'whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=', webhookId: 'evt_2', body: '{}', timestampSeconds: 1 });
    assert.deepEqual([result.status, result.error], [307, 'HTTP 307']);
    assert.equal(target.received.length, 0);
  } finally {
    receiver.answer = () => ({ status: 200 });
    sender.close();
    await target.close();
  }
});

test('the secret is kept sealed: the endpoint row holds no trace of it', async () => {
  const u = await t.user();
  const { endpoint, secret } = await t.runtime.services.webhooks.create(u.id, { url: 'https://8.8.8.8/hook' });
  const row = await t.runtime.store.db.selectFrom('webhook_endpoints').selectAll().where('id', '=', endpoint.id).executeTakeFirstOrThrow();
  assert.ok(!JSON.stringify(row).includes(secret.slice(6)) && !JSON.stringify(row).includes(secret.slice(6, 20)));
  assert.ok(!JSON.stringify(await t.runtime.services.webhooks.list(u.id)).includes(secret.slice(6)));
});

test('another account\'s endpoint is not found, and cannot be deleted, disabled or read', async () => {
  const owner = await t.user();
  const other = await t.user();
  const { endpoint } = await t.runtime.services.webhooks.create(owner.id, { url: 'https://8.8.8.8/hook' });
  assert.equal(await t.runtime.services.webhooks.find(other.id, endpoint.id), null);
  for (const work of [
    () => t.runtime.services.webhooks.delete(other.id, endpoint.id),
    () => t.runtime.services.webhooks.setEnabled(other.id, endpoint.id, false),
    () => t.runtime.services.webhooks.deliveries(other.id, endpoint.id),
  ]) await assert.rejects(work(), (error: Problem) => error.code === 'not_found');
  assert.equal((await t.runtime.services.webhooks.find(owner.id, endpoint.id))!.status, 'enabled');
});
