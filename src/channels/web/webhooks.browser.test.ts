/**
 * Account → Webhooks in a real browser (Debian's chromium driven by playwright-core): a person
 * adds an endpoint (its secret shown once), an event reaches a receiver on loopback that verifies
 * it with standardwebhooks, the person sees the delivery (status code, duration) and sends it
 * again. Screenshots of the list and of the deliveries go to docs/screenshots/ with
 * UPDATE_SCREENSHOTS=1 (else to a temporary folder); each page shown passes the accessibility
 * checks of testing/browser.ts at desktop and phone widths.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { openBrowser, removeTemporaryShots, shoot, skip } from '../../testing/browser.ts';
import { API, listeningUrl, startTestApp, type TestApp } from '../../testing/harness.ts';
import { WebhookReceiver } from '../../testing/webhook-receiver.ts';

let t: TestApp;
let base: string;
let browser: Awaited<ReturnType<typeof openBrowser>>;
let context: BrowserContext;
let receiver: WebhookReceiver;

before(async () => {
  if (skip) return;
  t = await startTestApp({ webhookAllowPrivateUrls: true });
  base = await listeningUrl(t);
  receiver = await WebhookReceiver.start();
  browser = await openBrowser('webhooks');
  ({ context } = browser);
});

after(async () => {
  removeTemporaryShots();
  if (skip) return;
  await browser?.close();
  await t?.close();
  await receiver?.close();
});

test('register an endpoint, see its deliveries, send one again', { skip, timeout: 120_000 }, async () => {
  const page = await context.newPage();
  const email = `hooks-${Date.now()}@example.test`;
  await page.goto(`${base}/signup`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.waitForURL(/\/agents/);
  const user = (await t.runtime.services.accounts.findByEmail(email))!;
  await t.runtime.services.agents.create(user.id, { agent_name: 'Hooked' });
  const { token } = await t.runtime.services.keys.create(user.id, { label: 'browser' });

  await page.goto(`${base}/account`);
  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByLabel('URL').fill(receiver.url);
  await page.getByLabel('turn.completed').check();
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const secret = (await page.locator('#new-secret code').textContent())!;
  assert.match(secret, /^whsec_/);
  receiver.secret = secret;
  await shoot(page, 'webhooks-new');

  const sent = await fetch(`${base}${API}/messages`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ text: 'hello hooks' }),
  });
  assert.equal(sent.status, 200);
  await receiver.until((got) => got.length === 1);
  assert.equal(receiver.received[0]!.verified, true);

  await page.reload(); // the secret is gone on reload: shown once
  assert.equal(await page.locator('#new-secret').count(), 0);
  await page.getByRole('link', { name: /Deliveries/ }).click();
  for (let i = 0; i < 50 && await page.locator('tr[data-state="delivered"]').count() === 0; i++) {
    await page.waitForTimeout(100);
    await page.reload();
  }
  const row = page.locator('tr[data-state="delivered"]').first();
  assert.equal((await row.locator('[data-status]').textContent())!.trim(), '200');
  assert.match((await row.locator('td[data-label="Duration"]').textContent())!, /^\d+ ms$/);
  await page.goto(`${base}/account/webhooks`);
  await shoot(page, 'webhooks');
  await page.getByRole('link', { name: /Deliveries/ }).click();
  await page.getByRole('button', { name: /Send again/ }).first().click();
  await receiver.until((got) => got.length === 2);
  assert.equal(receiver.received[1]!.webhookId, receiver.received[0]!.webhookId);
  await page.reload();
  for (let i = 0; i < 50 && await page.locator('tr[data-state="delivered"]').count() < 2; i++) {
    await page.waitForTimeout(100);
    await page.reload();
  }
  assert.equal(await page.locator('tr[data-delivery-id]').count(), 2);
  await shoot(page, 'webhook-deliveries');
  await page.close();
});
