/**
 * Account → Webhooks in a real browser (Debian's chromium driven by playwright-core): a person
 * adds an endpoint (its secret shown once), an event reaches a receiver on loopback that verifies
 * it with standardwebhooks, the person sees the delivery (status code, duration) and sends it
 * again. Screenshots of the list and of the deliveries go to docs/screenshots/ with
 * UPDATE_SCREENSHOTS=1 (else to a temporary folder), as web-app.browser.test.ts does.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { chromium, type BrowserContext } from 'playwright-core';
import { API, startTestApp, type TestApp } from '../../testing/harness.ts';
import { WebhookReceiver } from '../../testing/webhook-receiver.ts';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = process.env.UPDATE_SCREENSHOTS === '1'
  ? fileURLToPath(new URL('../../../docs/screenshots/', import.meta.url))
  : mkdtempSync(join(tmpdir(), 'agent-channel-screenshots-'));

const skip = process.env.TEST_DB === 'postgres'
  ? 'browser tests run once, in the SQLite pass'
  : !existsSync(CHROMIUM) && process.env.CI !== 'true'
    ? `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the browser tests`
    : false;

let t: TestApp;
let base: string;
let context: BrowserContext;
let userDataDir: string;
let receiver: WebhookReceiver;

before(async () => {
  if (skip) return;
  t = await startTestApp({ webhookAllowPrivateUrls: true });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  assert.ok(address && typeof address === 'object');
  base = `http://127.0.0.1:${address.port}`;
  receiver = await WebhookReceiver.start();
  userDataDir = mkdtempSync(join(tmpdir(), 'agent-channel-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  if (process.env.UPDATE_SCREENSHOTS !== '1') rmSync(SHOTS, { recursive: true, force: true });
  if (skip) return;
  await context?.close();
  await t?.close();
  await receiver?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
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
  await page.screenshot({ path: join(SHOTS, 'webhooks-new-1280.png'), fullPage: true });

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
  await page.screenshot({ path: join(SHOTS, 'webhooks-1280.png'), fullPage: true });
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
  await page.screenshot({ path: join(SHOTS, 'webhook-deliveries-1280.png'), fullPage: true });
  await page.close();
});
