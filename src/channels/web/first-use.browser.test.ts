/**
 * What a newcomer meets first, in a real browser (Debian's chromium, playwright-core): the agents
 * form that says the free plan's limit before it is switched off, the new key with curl lines to
 * paste, the chat that lists the built-in agent's directives and settles in place what the agent
 * waits for (approve, approve all of a kind, reject with a reason, yes/no buttons, a typed answer
 * refused then taken), a failed message sent again, and the API reference at /docs. Every state is
 * checked by src/testing/browser.ts's shoot (axe, contrast in light and dark, layout at 1280, 390
 * and 320 px), and shot into docs/screenshots/ with UPDATE_SCREENSHOTS=1.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { DESKTOP, openBrowser, PHONE, removeTemporaryShots, shoot, SHOTS, skip } from '../../testing/browser.ts';
import { listeningUrl, startTestApp, type TestApp } from '../../testing/harness.ts';

let t: TestApp;
let base: string;
let browser: Awaited<ReturnType<typeof openBrowser>>;
let context: BrowserContext;

before(async () => {
  if (skip) return;
  t = await startTestApp({ waitCeilingMs: 5_000 });
  base = await listeningUrl(t);
  browser = await openBrowser('first-use');
  ({ context } = browser);
});

after(async () => {
  removeTemporaryShots();
  if (skip) return;
  await browser?.close();
  await t?.close();
});

/** A page that records script errors, for the end of the test to say there were none. */
async function watchedPage(problems: string[]): Promise<Page> {
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    // A refused answer is a 422 on purpose: the browser logs its "Failed to load resource".
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
  });
  return page;
}

/** Sends a chat message by the form, as a person would. */
async function say(page: Page, text: string): Promise<void> {
  await page.getByLabel('Message').fill(text);
  await page.getByRole('button', { name: 'Send', exact: true }).click();
}

test('a newcomer: the plan\'s limit said first, a key with curl to paste, a chat that settles in place and sends again, the API reference', { skip, timeout: 600_000 }, async () => {
  const problems: string[] = [];
  const page = await watchedPage(problems);

  // Sign up; the agents form says the free plan's one agent before it is used.
  await page.goto(`${base}/signup`);
  await page.getByLabel('Email').fill(`first-${Date.now()}@example.test`);
  await page.getByLabel('Password').fill('a first-use password');
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.waitForURL(/\/agents\?welcome=1$/);
  const limitNote = page.locator('#agent-limit-note');
  assert.match(await limitNote.textContent() ?? '', /^This will be your only agent on the free plan: once it is created, this form is switched off\. The free plan allows 1 agent/);
  assert.equal(await page.getByRole('button', { name: 'Create agent' }).isDisabled(), false);
  await shoot(page, 'agents-first', { dark: true });
  await page.getByLabel('Name').fill('Helper');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await page.getByText('Agent “Helper” is ready').waitFor();
  assert.equal(await limitNote.count(), 0, 'at the limit the form says so in its place');

  // A new key comes with curl lines for this server, the key in them, and a Copy button of their own.
  await page.goto(`${base}/account/keys`);
  await page.getByLabel('Label').fill('laptop');
  await page.getByRole('button', { name: 'Create key' }).click();
  const token = (await page.locator('#new-key').textContent())!.trim();
  const curl = (await page.locator('#new-key-curl').textContent())!;
  assert.ok(curl.includes(`curl -s -H 'Authorization: Bearer ${token}' ${base}/api/v1/api-channel/agents\n`), curl);
  assert.ok(curl.includes(`-d '{"text":"hello"}' ${base}/api/v1/api-channel/messages`), curl);
  await page.getByRole('button', { name: 'Copy the curl lines' }).click();
  await page.locator('.copy-block [data-copy-status]').filter({ hasText: /^(Copied\.|Selected: press Ctrl\+C to copy\.)$/ }).waitFor();
  await shoot(page, 'keys-new', { dark: true });
  await page.reload();
  assert.equal(await page.locator('#new-key-curl').count(), 0, 'shown once, with the key');

  // A new chat lists the built-in agent's directives.
  await page.goto(`${base}/chat`);
  const help = page.locator('details.chat-help');
  assert.equal(await help.getAttribute('open'), '', 'open on a new chat');
  for (const directive of ['!sleep 3000 hello', '!fail', '!action email Send the report', '!ask yesno Proceed?', '!ask-user someone@example.com text Which room?']) {
    await help.getByText(directive, { exact: true }).waitFor();
  }
  await shoot(page, 'chat-help', { dark: true });

  // An action: its card is in the chat, with Approve, Approve all of its kind and Reject; approved
  // there, it goes at once and the agent's next turn follows, with no reload.
  await say(page, '!action email Send the report');
  const reportCard = page.locator('[data-awaiting^="op_"]', { hasText: 'Send the report' });
  await reportCard.getByRole('heading', { name: 'Send the report' }).waitFor();
  await page.evaluate('window.notReloaded = true');
  assert.equal(await page.locator('[data-chat-badge] .badge').textContent(), 'waiting for you');
  for (const name of ['Approve “Send the report”', 'Approve all “email”', 'Reject “Send the report”']) await reportCard.getByRole('button', { name }).waitFor();
  await shoot(page, 'chat-approval', { dark: true });
  await reportCard.getByRole('button', { name: 'Approve “Send the report”' }).click();
  await page.locator('[data-settle-status]').getByText('Approved. The agent carries on.').waitFor();
  await page.locator('.msg-text', { hasText: 'Done: Send the report' }).waitFor();
  assert.equal(await reportCard.count(), 0, 'settled in place');
  await page.locator('[data-chat-waiting]').waitFor({ state: 'hidden' });

  // Two of a kind, approved together; then one rejected with a reason, which the agent re-plans around.
  await say(page, '!action email Send the digest');
  await page.locator('[data-awaiting]', { hasText: 'Send the digest' }).waitFor();
  await say(page, '!action email Send the minutes');
  await page.locator('[data-chat-waiting]').getByText('2 actions to approve or reject').waitFor();
  await page.locator('[data-awaiting]', { hasText: 'Send the digest' }).getByRole('button', { name: 'Approve all “email”' }).click();
  await page.locator('[data-settle-status]').getByText('Approved 2 actions. The agent carries on.').waitFor();
  await page.locator('.msg-text', { hasText: 'Done: Send the minutes' }).waitFor();
  await page.locator('.msg-text', { hasText: 'Done: Send the digest' }).waitFor();
  await say(page, '!action deploy Deploy to production');
  const deployCard = page.locator('[data-awaiting]', { hasText: 'Deploy to production' });
  await deployCard.getByLabel(/Reason for rejecting/).fill('not on a Friday');
  await deployCard.getByLabel(/Reason for rejecting/).press('Enter');
  await page.locator('.msg-text', { hasText: 'Re-planned: not on a Friday' }).waitFor();

  // A yes/no question is answered with its button.
  await say(page, '!ask yesno Proceed?');
  const proceed = page.locator('[data-awaiting^="req_"]', { hasText: 'Proceed?' });
  await proceed.getByRole('button', { name: 'Yes “Proceed?”' }).waitFor();
  await shoot(page, 'chat-question');
  await proceed.getByRole('button', { name: 'Yes “Proceed?”' }).click();
  await page.locator('.msg-text', { hasText: 'Noted: yes' }).waitFor();

  // A typed answer that does not fit is refused in its card, which keeps it; one that fits is taken.
  await say(page, '!ask number How many copies?');
  const copies = page.locator('[data-awaiting^="req_"]', { hasText: 'How many copies?' });
  await copies.getByLabel('Your answer “How many copies?”').fill('a few');
  await copies.getByRole('button', { name: 'Answer “How many copies?”' }).click();
  const refusal = copies.locator('[data-settle-error]');
  await refusal.getByText(/^Not accepted: /).waitFor();
  assert.equal(await refusal.getAttribute('role'), 'alert');
  assert.equal(await copies.getByLabel('Your answer “How many copies?”').inputValue(), 'a few');
  await shoot(page, 'chat-answer-refused');
  await copies.getByLabel('Your answer “How many copies?”').fill('3');
  await copies.getByRole('button', { name: 'Answer “How many copies?”' }).click();
  await page.locator('.msg-text', { hasText: 'Noted: 3' }).waitFor();
  assert.equal(await page.evaluate('window.notReloaded'), true, 'all of it without a reload');

  // A message the agent failed on offers to send it again; sent again, it is a new try.
  await say(page, '!fail');
  const failed = page.locator('.msg-error').last();
  await failed.getByRole('button', { name: 'Send again' }).waitFor();
  await shoot(page, 'chat-failed', { dark: true });
  await failed.getByRole('button', { name: 'Send again' }).click();
  await page.locator('.msg-error').nth(1).waitFor(); // (not waitForFunction: the page's CSP allows no eval)
  const sessionId = new URL(page.url()).searchParams.get('session')!;
  const tries = await t.runtime.store.db.selectFrom('turns').select('text').where('session_id', '=', sessionId).where('text', '=', '!fail').execute();
  assert.equal(tries.length, 2, 'the message, then once more');
  // Reloaded, the page draws the same: each failed turn with its Send again.
  await page.reload();
  assert.equal(await page.locator('.msg-error form[data-resend]').count(), 2);
  assert.equal(await help.getAttribute('open'), null, 'the directives fold away once the chat has begun');

  // The API reference: named for the product, its description with the document's address and the long-turn recipe.
  await page.goto(`${base}/docs/`);
  assert.equal(await page.title(), 'agent-channel API reference');
  await page.getByRole('link', { name: '/openapi.json' }).waitFor();
  await page.getByText('A turn that runs long').waitFor();
  await page.getByText('The built-in agent', { exact: true }).waitFor();
  for (const viewport of [DESKTOP, PHONE]) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: join(SHOTS, `docs-${viewport.width}.png`) });
  }
  await page.setViewportSize(DESKTOP);
  assert.deepEqual(problems, [], 'no script errors on any page');
  await page.close();
});
