/**
 * The web app in a real browser (Debian's chromium driven by playwright-core), as a new user
 * would go through it: sign up → agent → key (shown once) → the key works → revoke → 401 →
 * inbox (approve an action, answer a question) → transcript → chat. Writes a screenshot of
 * every page at desktop and phone widths to docs/screenshots/.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { API, startTestApp, type TestApp } from '../../testing/harness.ts';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = fileURLToPath(new URL('../../../docs/screenshots/', import.meta.url));
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

const skip = process.env.TEST_DB === 'postgres'
  ? 'browser tests run once, in the SQLite pass'
  : !existsSync(CHROMIUM) && process.env.CI !== 'true'
    ? `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the browser tests`
    : false;

let t: TestApp;
let base: string;
let context: BrowserContext;
let userDataDir: string;

before(async () => {
  if (skip) return;
  t = await startTestApp({ waitCeilingMs: 5_000 });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  assert.ok(address && typeof address === 'object');
  base = `http://127.0.0.1:${address.port}`;
  userDataDir = mkdtempSync(join(tmpdir(), 'agent-channel-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: DESKTOP,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic'],
  });
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  if (skip) return;
  await context?.close();
  await t?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
});

// Basic accessibility checks run in the page (as a string: the type-check has no DOM types).
const A11Y_CHECK = `(() => {
  const problems = [];
  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
    if (!el.labels || el.labels.length === 0) problems.push('unlabelled ' + el.tagName + ' ' + (el.name || el.id));
  }
  if (document.querySelectorAll('h1').length !== 1) problems.push('h1 count ' + document.querySelectorAll('h1').length);
  if (!document.querySelector('main')) problems.push('no main landmark');
  if (!document.documentElement.lang) problems.push('no lang');
  for (const b of document.querySelectorAll('button, a')) {
    if (!b.textContent.trim() && !b.getAttribute('aria-label')) problems.push('nameless ' + b.outerHTML.slice(0, 80));
  }
  return problems;
})()`;

/** The page as it is now, at desktop and at phone width (after the accessibility checks). */
async function shoot(page: Page, name: string): Promise<void> {
  assert.deepEqual(await page.evaluate(A11Y_CHECK), [], `accessibility of ${name}`);
  await page.setViewportSize(DESKTOP);
  await page.screenshot({ path: join(SHOTS, `${name}-${DESKTOP.width}.png`), fullPage: true });
  await page.setViewportSize(PHONE);
  await page.screenshot({ path: join(SHOTS, `${name}-${PHONE.width}.png`), fullPage: true });
  await page.setViewportSize(DESKTOP);
}

interface ApiBody {
  agents?: { name: string }[];
  session_id?: string;
  reply?: string;
}

async function api(path: string, token: string, init: { method?: string; body?: unknown } = {}): Promise<{ status: number; body: ApiBody }> {
  const res = await fetch(`${base}${API}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${token}`, ...(init.body ? { 'content-type': 'application/json' } : {}) },
    ...(init.body ? { body: JSON.stringify(init.body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as ApiBody };
}

test('a new user goes through the whole web app', { skip, timeout: 120_000 }, async (ctx) => {
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    // Pages answered with an error status on purpose (the 404 page, a refused answer) log this line.
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
  });
  page.on('response', (response) => {
    if (response.url().includes('/assets/') && response.status() >= 400) problems.push(`asset ${response.url()}: ${response.status()}`);
  });

  // Visitor pages; the first Tab reaches the skip link, which is then visible.
  await page.goto(`${base}/`);
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate('document.activeElement.className'), 'skip');
  await page.reload();
  await shoot(page, 'home');
  await page.goto(`${base}/login`);
  await shoot(page, 'login');
  await page.goto(`${base}/nowhere`);
  await shoot(page, 'not-found');

  // Sign up.
  const email = `browser-${Date.now()}@example.test`;
  await page.goto(`${base}/signup`);
  await shoot(page, 'signup');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('a browser password');
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.waitForURL(/\/agents\?welcome=1$/);
  const cookies = await context.cookies(base);
  const session = cookies.find((c) => c.name === 'ac_session');
  assert.ok(session?.httpOnly, 'the session cookie is HttpOnly');
  assert.equal(session?.sameSite, 'Strict');

  // Create an agent.
  await page.getByLabel('Name').fill('Report bot');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await page.getByText('Agent “Report bot” is ready').waitFor();
  await shoot(page, 'agents');

  // Create a key: the secret is shown once.
  await page.getByRole('link', { name: 'API keys' }).first().click();
  await page.waitForURL(/\/account\/keys$/);
  await page.getByLabel('Label').fill('browser key');
  await page.getByLabel('Rate limit (requests per minute)').fill('100');
  await page.getByRole('button', { name: 'Create key' }).click();
  const secretBox = page.locator('#new-key');
  await secretBox.waitFor();
  const token = await secretBox.inputValue();
  assert.match(token, /^ak_[A-Za-z0-9]+_[A-Za-z0-9]{43}$/);
  await page.getByRole('button', { name: 'Copy' }).click();
  await page.getByRole('button', { name: /Copied|Press Ctrl\+C/ }).waitFor();
  await shoot(page, 'keys-new');
  await page.reload();
  assert.equal(await page.locator('#new-key').count(), 0, 'the secret is gone on reload');
  assert.ok(!(await page.content()).includes(token));
  await shoot(page, 'keys');

  // The key works against the API.
  const listed = await api('/agents', token);
  assert.equal(listed.status, 200);
  assert.equal(listed.body.agents?.[0]?.name, 'Report bot');

  // Revoke it, behind a confirmation step; then it gets 401.
  const keyId = token.split('_')[1]!;
  await page.locator(`tr[data-key-id="${keyId}"]`).getByRole('link', { name: /Revoke/ }).click();
  await page.getByRole('heading', { name: 'Revoke “browser key”?' }).waitFor();
  await shoot(page, 'keys-revoke');
  await page.getByRole('button', { name: 'Revoke key' }).click();
  await page.getByText('is revoked').waitFor();
  assert.equal(await page.locator(`tr[data-key-id="${keyId}"] .badge`).textContent(), 'revoked');
  assert.equal((await api('/agents', token)).status, 401);

  await page.goto(`${base}/account`);
  await shoot(page, 'account');

  // Inbox: an action and a question drafted through the API (contract §8).
  const user = await t.runtime.services.accounts.findByEmail(email);
  const second = (await t.runtime.services.keys.create(user!.id, { label: 'second key' })).token;
  const hasMissions = 'missions' in t.runtime.services;
  let missionSession: string | undefined;
  if (hasMissions) {
    const action = (await api('/messages', second, { method: 'POST', body: { text: '!action email Send the report' } })).body;
    missionSession = action.session_id;
    assert.match(action.reply ?? '', /op_/);
    await api('/messages', second, { method: 'POST', body: { text: '!ask yesno Proceed?', session_id: missionSession } });
    await page.getByRole('link', { name: 'Inbox' }).click();
    await page.locator('.item-title', { hasText: 'Send the report' }).waitFor();
    await page.locator('.item-title', { hasText: 'Proceed?' }).waitFor();
    await shoot(page, 'inbox');
    await page.getByRole('button', { name: 'Approve', exact: true }).click();
    await page.getByText('Approved.').waitFor();
    // A refused answer shows the agent's reason; a fitting one is accepted.
    await page.getByLabel('Your answer').fill('perhaps');
    await page.getByRole('button', { name: 'Answer' }).click();
    await page.getByText('Not accepted:').waitFor();
    await shoot(page, 'inbox-refused');
    await page.getByLabel('Your answer').fill('yes');
    await page.getByRole('button', { name: 'Answer' }).click();
    await page.getByText('Answer accepted').waitFor();
    await page.getByText('No open questions.').waitFor();
  } else {
    ctx.diagnostic('missions service not wired yet: inbox steps skipped');
    await page.goto(`${base}/inbox`);
    await shoot(page, 'inbox');
    missionSession = (await api('/messages', second, { method: 'POST', body: { text: 'hello through the API' } })).body.session_id;
  }

  // Read the transcript.
  await page.getByRole('link', { name: 'Conversations' }).click();
  await page.getByRole('link', { name: missionSession! }).waitFor();
  await shoot(page, 'conversations');
  await page.getByRole('link', { name: missionSession! }).click();
  await page.getByRole('heading', { name: 'Conversation with Report bot' }).waitFor();
  if (hasMissions) {
    await page.getByText('Done: Send the report').waitFor();
    await page.getByText('Noted: yes').waitFor();
  }
  await shoot(page, 'conversation');

  // Chat: a new conversation, a quick reply, then a slow one that shows it is processing.
  await page.getByRole('link', { name: 'Chat', exact: true }).click();
  await page.getByLabel('Message').fill('hello from the browser');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.getByText('You said: hello from the browser').waitFor();
  await page.waitForURL(/\/chat\?session=ses_/);
  await page.getByLabel('Message').fill('!sleep 2000 that took a while');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.getByText('The agent is working on it').waitFor();
  await shoot(page, 'chat-processing');
  await page.getByText('You said: that took a while').waitFor({ timeout: 20_000 });
  assert.equal(await page.locator('[data-chat]').getAttribute('data-status'), 'idle');
  await shoot(page, 'chat');

  await page.goto(`${base}/`);
  await shoot(page, 'overview');

  // Log out.
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByText('You are logged out.').waitFor();
  assert.deepEqual(problems, [], 'no script errors on any page');
  await page.close();
});

test('the pages work without JavaScript (forms post, the chat page refreshes itself)', { skip, timeout: 60_000 }, async () => {
  // A second fresh profile, with JavaScript off.
  const dir = mkdtempSync(join(tmpdir(), 'agent-channel-chromium-nojs-'));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true, viewport: DESKTOP, javaScriptEnabled: false,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic'],
  });
  try {
    const page = await ctx.newPage();
    page.setDefaultTimeout(15_000);
    await page.goto(`${base}/signup`);
    await page.getByLabel('Email').fill(`nojs-${Date.now()}@example.test`);
    await page.getByLabel('Password').fill('a browser password');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.waitForURL(/\/agents/);
    await page.getByLabel('Name').fill('Plain bot');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByText('Agent “Plain bot” is ready').waitFor();
    await page.goto(`${base}/chat`);
    await page.getByLabel('Message').fill('!sleep 7000 patience');
    await page.getByRole('button', { name: 'Send' }).click();
    // The post waits up to the ceiling (5 s here), then the page shows the turn running and refreshes itself.
    await page.getByText('The agent is working on it').waitFor({ timeout: 20_000 });
    await page.getByText('You said: patience').waitFor({ timeout: 20_000 });
  } finally {
    await ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
