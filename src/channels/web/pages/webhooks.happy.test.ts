import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';
import { send } from '../../../testing/conversation.ts';
import { WebClient } from '../../../testing/web-client.ts';
import { WebhookReceiver } from '../../../testing/webhook-receiver.ts';

/** Account → Webhooks in the web app (contract §9.5). */
let t: TestApp;
let receiver: WebhookReceiver;
before(async () => {
  t = await startTestApp({ webhookAllowPrivateUrls: true, webhookRetryScheduleMs: [20] });
  receiver = await WebhookReceiver.start();
});
after(async () => {
  await t.close();
  await receiver.close();
});

const secretOf = (body: string) => /id="new-secret"[^>]*><code>(whsec_[A-Za-z0-9+/=]+)<\/code>/.exec(body)?.[1];

test('an endpoint added is listed, its secret shown once; its deliveries are shown with status code and duration, and sent again', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  const user = (await t.runtime.services.accounts.findByEmail(email))!;
  await t.runtime.services.agents.create(user.id, { agent_name: 'Hooked' });
  const { token } = await t.runtime.services.keys.create(user.id, { label: 'k' });
  await web.get('/account/webhooks');
  const created = await web.post('/account/webhooks', { url: receiver.url, events: 'turn.completed' });
  assert.equal(created.statusCode, 303);
  assert.doesNotMatch(created.body, /whsec_/);
  const shown = await web.get('/account/webhooks');
  const secret = secretOf(shown.body);
  assert.ok(secret, 'the secret is shown');
  assert.match(shown.body, /Copy this secret now/);
  assert.doesNotMatch((await web.get('/account/webhooks')).body, /whsec_/, 'shown once');
  const [endpoint] = await t.runtime.services.webhooks.list(user.id);
  assert.deepEqual(endpoint!.events, ['turn.completed']);
  receiver.secret = secret!;

  await send(t, { auth: { authorization: `Bearer ${token}` } }, { text: 'hello hooks' });
  await receiver.until((got) => got.length === 1);
  assert.equal(receiver.received[0]!.verified, true);
  let page = await web.get(`/account/webhooks/${endpoint!.id}`);
  for (let i = 0; i < 100 && !/data-state="delivered"/.test(page.body); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    page = await web.get(`/account/webhooks/${endpoint!.id}`);
  }
  assert.match(page.body, /data-state="delivered"/);
  assert.match(page.body, /<td data-label="Status code" data-status>200<\/td>/);
  assert.match(page.body, /<td data-label="Duration">\d+ ms<\/td>/);
  const deliveryId = /data-delivery-id="(\d+)"/.exec(page.body)![1];
  const resent = await web.post(`/account/webhooks/${endpoint!.id}/deliveries/${deliveryId}/resend`);
  assert.equal(resent.statusCode, 303);
  await receiver.until((got) => got.length === 2);
  assert.equal(receiver.received[1]!.webhookId, receiver.received[0]!.webhookId);
  assert.match((await web.get('/account/webhooks')).body, /Last delivery/);
});

test('disable and enable (the list says why it is disabled); delete removes it', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  const user = (await t.runtime.services.accounts.findByEmail(email))!;
  await web.get('/account/webhooks');
  assert.equal((await web.post('/account/webhooks', { url: receiver.url })).statusCode, 303);
  const [endpoint] = await t.runtime.services.webhooks.list(user.id);
  assert.equal(endpoint!.events.length, 8, 'no box ticked: every type');
  await web.get(`/account/webhooks/${endpoint!.id}`);
  assert.equal((await web.post(`/account/webhooks/${endpoint!.id}/disable`)).statusCode, 303);
  assert.match((await web.get('/account/webhooks')).body, /Disabled by you\./);
  assert.equal((await web.post(`/account/webhooks/${endpoint!.id}/enable`)).statusCode, 303);
  assert.equal((await t.runtime.services.webhooks.find(user.id, endpoint!.id))!.status, 'enabled');
  assert.equal((await web.post(`/account/webhooks/${endpoint!.id}/delete`)).statusCode, 303);
  assert.match((await web.get('/account/webhooks')).body, /You have no webhook endpoints yet/);
});

test('a URL refused is said beside the field, and nothing is added', async () => {
  const web = new WebClient(t);
  const email = await web.signup();
  const user = (await t.runtime.services.accounts.findByEmail(email))!;
  await web.get('/account/webhooks');
  const res = await web.post('/account/webhooks', { url: 'not a url' });
  assert.equal(res.statusCode, 422);
  assert.match(res.body, /URL must be an absolute URL such as https:\/\/example.com\/webhooks\./);
  assert.equal((await t.runtime.services.webhooks.list(user.id)).length, 0);
});

test('another account\'s endpoint answers 404 to every page and action, and stays as it was', async () => {
  const owner = await t.user();
  const { endpoint } = await t.runtime.services.webhooks.create(owner.id, { url: receiver.url });
  const web = new WebClient(t);
  await web.signup();
  await web.get('/account/webhooks');
  assert.equal((await web.get(`/account/webhooks/${endpoint.id}`)).statusCode, 404);
  for (const action of ['disable', 'delete', 'deliveries/1/resend']) {
    assert.equal((await web.post(`/account/webhooks/${endpoint.id}/${action}`)).statusCode, 404, action);
  }
  assert.equal((await t.runtime.services.webhooks.find(owner.id, endpoint.id))!.status, 'enabled');
});
