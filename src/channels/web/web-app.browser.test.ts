/**
 * The web app in a real browser (Debian's chromium driven by playwright-core), as a new user
 * would go through it: sign up → agent → key (shown once) → the key works → revoke → 401 →
 * inbox (approve an action, answer a question) → transcript → chat. Takes a screenshot of
 * every page at desktop and phone widths: into docs/screenshots/ with UPDATE_SCREENSHOTS=1 (they
 * differ on every run, by ids and times, so a plain `npm test` leaves the committed ones alone
 * and writes its own to a temporary folder). Every page and state shown is audited by axe-core
 * (WCAG 2.0–2.2 A and AA, and best practices) at both widths, its colours in dark mode too; a few
 * checks of our own cover what axe does not: reflow, non-text contrast and focus rings, the text
 * that CSS draws, one h1, and names for what is made focusable.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import {
  axeOnCopy, boxes, DESKTOP, focused, openBrowser, PHONE, pressUntil, removeTemporaryShots, shoot, skip, STRUCTURE_CHECK, wholeKeyInView,
} from '../../testing/browser.ts';
import { API, listeningUrl, startTestApp, type TestApp } from '../../testing/harness.ts';

let t: TestApp;
let base: string;
let browser: Awaited<ReturnType<typeof openBrowser>>;
let context: BrowserContext;

before(async () => {
  if (skip) return;
  t = await startTestApp({ waitCeilingMs: 5_000 });
  base = await listeningUrl(t);
  browser = await openBrowser('web-app');
  ({ context } = browser);
});

after(async () => {
  removeTemporaryShots();
  if (skip) return;
  await browser?.close();
  await t?.close();
});

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

/** Waits until the agent has a running turn (so that the next message to it is queued). */
async function agentBusy(agentId: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const running = await t.runtime.store.db.selectFrom('jobs').select('id').where('agent_id', '=', agentId).where('status', '=', 'running').execute();
    if (running.length > 0) return;
    assert.ok(Date.now() < deadline, 'the agent started its turn');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('a new user goes through the whole web app', { skip, timeout: 600_000 }, async () => {
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
  await shoot(page, 'login', { dark: true });
  await page.goto(`${base}/nowhere`);
  await shoot(page, 'not-found');

  // Sign up.
  const email = `browser-${Date.now()}@example.test`;
  await page.goto(`${base}/signup`);
  await shoot(page, 'signup');
  // Refused first: every mistake said at once, beside its field.
  await page.getByLabel('Email').fill('not an email');
  await page.getByLabel('Password').fill('short');
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.getByText('Password must be at least').waitFor();
  await shoot(page, 'signup-errors');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('a browser password');
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.waitForURL(/\/agents\?welcome=1$/);
  const cookies = await context.cookies(base);
  const session = cookies.find((c) => c.name === 'ac_session');
  assert.ok(session?.httpOnly, 'the session cookie is HttpOnly');
  assert.equal(session?.sameSite, 'Strict');

  // The agents form: the workspace select is as tall as the Name input, side by side.
  const [nameBox, selectBox] = await boxes(page, ['#f-agent_name', '#f-workspace']);
  assert.equal(Math.round(nameBox!.height), Math.round(selectBox!.height), 'the select and the input have one height');
  assert.equal(Math.round(nameBox!.y), Math.round(selectBox!.y), 'and line up');

  // A second tab on the same page, still showing the form, for later.
  const staleTab = await context.newPage();
  await staleTab.goto(`${base}/agents`);

  // Create an agent: at the free plan's limit the form is then switched off and says why.
  await page.getByLabel('Name').fill('Report bot');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await page.getByText('Agent “Report bot” is ready').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Create agent' }).isDisabled(), true, 'the form is off at the limit');
  await page.getByText('so you cannot create another').waitFor();
  await shoot(page, 'agents', { dark: true });
  // The stale tab's form goes through to the server, which refuses with the plan's limit.
  await staleTab.getByLabel('Name').fill('Second bot');
  await staleTab.getByRole('button', { name: 'Create agent' }).click();
  await staleTab.getByText("You have reached your plan's agent limit.").waitFor();
  await staleTab.getByText('ask the operator of this service to move your account to it').waitFor();
  await shoot(staleTab, 'agents-limit');
  await staleTab.close();
  const user = await t.runtime.services.accounts.findByEmail(email);
  const [agent] = await t.runtime.services.agents.listForUser(user!.id);

  // Create a key: the secret is shown once.
  await page.getByRole('link', { name: 'API keys' }).first().click();
  await page.waitForURL(/\/account\/keys$/);
  // The three fields of the create form share one row at desktop width, inputs aligned.
  const inputs = await boxes(page, ['#f-label', '#f-rate_limit', '#f-expires_in_days']);
  assert.deepEqual(inputs.map((b) => Math.round(b.y)), inputs.map(() => Math.round(inputs[0]!.y)), 'the inputs line up');
  const form = (await boxes(page, ['#create-h + form']))[0]!;
  const right = inputs[2]!.x + inputs[2]!.width;
  assert.ok(form.x + form.width - right < 2, `the last input reaches the form's right edge (no empty fourth column): ${right} vs ${form.x + form.width}`);
  // Refused first: a rate limit above the most allowed, said beside its field.
  await page.getByLabel('Rate limit (requests per minute)').fill('999999');
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.locator('#f-rate_limit-error').waitFor();
  await shoot(page, 'keys-errors');
  await page.getByLabel('Label').fill('browser key');
  await page.getByLabel('Rate limit (requests per minute)').fill('100');
  await page.getByRole('button', { name: 'Create key' }).click();
  const secretBox = page.locator('#new-key');
  await secretBox.waitFor();
  const token = (await secretBox.textContent())!.trim();
  assert.match(token, /^ak_[A-Za-z0-9]+_[A-Za-z0-9]{43}$/);
  await page.getByRole('button', { name: 'Copy the key' }).click();
  await page.getByRole('status').filter({ hasText: /^(Copied\.|Selected: press Ctrl\+C to copy\.)$/ }).waitFor();
  await wholeKeyInView(page);
  await shoot(page, 'keys-new');
  await page.reload();
  assert.equal(await page.locator('#new-key').count(), 0, 'the secret is gone on reload');
  assert.ok(!(await page.content()).includes(token));

  // The key works against the API, and its last use shows.
  const listed = await api('/agents', token);
  assert.equal(listed.status, 200);
  assert.equal(listed.body.agents?.[0]?.name, 'Report bot');
  await t.runtime.services.keys.settled();
  // Keys in every state: an inactive one (switched off by the operator) and an expired one.
  const inactive = (await t.runtime.services.keys.create(user!.id, { label: 'paused key' })).key;
  await t.runtime.services.keys.setEnabled(inactive.key_id, false);
  const expired = (await t.runtime.services.keys.create(user!.id, { label: 'old key', expires_in_days: 1 })).key;
  await t.runtime.store.db.updateTable('api_keys').set({ expires_at: new Date(Date.now() - 86_400_000).toISOString() }).where('id', '=', expired.key_id).execute();
  await page.reload();
  const keyId = token.split('_')[1]!;
  const row = page.locator(`tr[data-key-id="${keyId}"]`);
  assert.match(await row.locator('td[data-label="Last used"] time').getAttribute('datetime') ?? '', /^\d{4}-/, 'the last use is shown');
  assert.equal(await page.locator(`tr[data-key-id="${inactive.key_id}"] .badge`).textContent(), 'inactive');
  assert.equal(await page.locator(`tr[data-key-id="${expired.key_id}"] .badge`).textContent(), 'expired');
  await shoot(page, 'keys', { dark: true });

  // Revoke it, behind a confirmation step; then it gets 401.
  await row.getByRole('link', { name: /Revoke/ }).click();
  await page.getByRole('heading', { name: 'Revoke “browser key”?' }).waitFor();
  await shoot(page, 'keys-revoke');
  await page.getByRole('button', { name: 'Revoke key' }).click();
  // The notice, not any text: a key id ending in "is" beside its "revoked" badge reads "…is revoked" too.
  await page.getByRole('status').getByText('is revoked').waitFor();
  assert.equal(await page.locator(`tr[data-key-id="${keyId}"] .badge`).textContent(), 'revoked');
  assert.equal((await api('/agents', token)).status, 401);

  // The profile: reached from the signed-in email; no main navigation entry is current.
  await page.locator('a.who').click();
  await page.waitForURL(/\/account$/);
  assert.equal(await page.locator('.nav-main [aria-current]').count(), 0, 'no main navigation entry claims the profile');
  assert.equal(await page.locator('a.who').getAttribute('aria-current'), 'page');
  await shoot(page, 'account');

  // Inbox: actions and a question drafted through the API (contract §8).
  const second = (await t.runtime.services.keys.create(user!.id, { label: 'second key' })).token;
  const report = (await api('/messages', second, { method: 'POST', body: { text: '!action email Send the report' } })).body;
  const missionSession = report.session_id!;
  assert.match(report.reply ?? '', /op_/);
  await api('/messages', second, { method: 'POST', body: { text: '!ask yesno Proceed?', session_id: missionSession } });
  const digest = (await api('/messages', second, { method: 'POST', body: { text: '!action email Send the digest' } })).body;
  const deploy = (await api('/messages', second, { method: 'POST', body: { text: '!action deploy Deploy to production' } })).body;
  const deployOp = /op_[A-Za-z0-9]+/.exec(deploy.reply ?? '')![0];
  await page.getByRole('link', { name: 'Inbox' }).click();
  for (const title of ['Send the report', 'Send the digest', 'Deploy to production', 'Proceed?']) await page.locator('.item-title', { hasText: title }).waitFor();
  await shoot(page, 'inbox', { dark: true });

  // Enter in the reason field rejects, with that reason (it never approves).
  const deployCard = page.locator('li.item', { hasText: 'Deploy to production' });
  await deployCard.getByLabel(/Reason for rejecting/).fill('not on a Friday');
  await deployCard.getByLabel(/Reason for rejecting/).press('Enter');
  await page.getByText('Rejected. The agent has been told.').waitFor();
  const rejected = await t.runtime.store.db.selectFrom('actions').select(['status', 'decision', 'reason']).where('id', '=', deployOp).executeTakeFirstOrThrow();
  assert.equal(rejected.decision, 'reject');
  assert.equal(rejected.reason, 'not on a Friday');
  assert.equal(await page.locator('.item-title', { hasText: 'Deploy to production' }).count(), 0);

  // Approve all “email”: both email actions at once.
  await page.locator('li.item', { hasText: 'Send the report' }).getByRole('button', { name: 'Approve all “email” (2)' }).click();
  await page.getByText('Approved 2 actions. The agent carries on.').waitFor();
  await page.getByText('Nothing to approve.').waitFor();

  // A refused answer shows the agent's reason (after a redirect); a fitting one is accepted.
  await page.getByLabel('Your answer').fill('perhaps');
  await page.getByRole('button', { name: 'Answer' }).click();
  await page.getByText('Not accepted:').waitFor();
  assert.equal(await page.getByLabel('Your answer').inputValue(), 'perhaps', 'the answer stays in the field');
  assert.match(page.url(), /\/inbox\?refused=req_/, 'shown after a redirect: a reload does not post again');
  await shoot(page, 'inbox-refused');
  await page.getByLabel('Your answer').fill('yes');
  await page.getByRole('button', { name: 'Answer' }).click();
  await page.getByText('Answer accepted').waitFor();
  await page.getByText('No open questions.').waitFor();

  // Read the transcripts: the agent name leads there too.
  await page.getByRole('link', { name: 'Conversations' }).click();
  // A row names its latest message (the link) above the session id.
  const missionRow = page.locator('tr', { hasText: missionSession });
  await missionRow.getByRole('link', { name: 'Report bot: Noted: yes' }).waitFor();
  await shoot(page, 'conversations');
  await page.getByRole('link', { name: `Report bot (conversation ${deploy.session_id})` }).click();
  await page.getByText('Re-planned: not on a Friday').waitFor();
  await page.goto(`${base}/conversations`);
  await missionRow.getByRole('link', { name: 'Report bot: Noted: yes' }).click();
  await page.getByRole('heading', { name: 'Conversation with Report bot' }).waitFor();
  await page.getByText('Done: Send the report').waitFor();
  await page.getByText('Noted: yes').waitFor();
  await shoot(page, 'conversation');
  await page.goto(`${base}/conversations/${digest.session_id}`);
  await page.getByText('Done: Send the digest').waitFor();

  // Chat: a new conversation, a quick reply; the header then offers a new chat and shows the status.
  await page.getByRole('link', { name: 'Chat', exact: true }).click();
  assert.equal(await page.getByRole('link', { name: 'New chat' }).isVisible(), false);
  await shoot(page, 'chat-new');
  await page.getByLabel('Message').fill('hello from the browser');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await page.getByText('You said: hello from the browser').waitFor();
  await page.waitForURL(/\/chat\?session=ses_/);
  await page.getByRole('link', { name: 'New chat' }).waitFor();
  assert.equal(await page.getByRole('link', { name: 'Earlier conversations' }).isVisible(), false);
  assert.equal(await page.locator('[data-chat-badge] .badge').textContent(), 'idle');
  assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Chat with Report bot');
  assert.equal(await page.getByText('Ctrl+Enter sends').isVisible(), true, 'with the script running, the shortcut is offered');

  // A slow reply shows that the agent is working on it, and appears by itself when it comes. The
  // page follows the conversation through the event feed: it reads the transcript once after
  // sending, then not again until the feed says the turn has ended (no polling meanwhile).
  const chatSession = new URL(page.url()).searchParams.get('session')!;
  const reads: number[] = [];
  const countRead = (request: { url(): string }) => { if (request.url().includes('/messages.json')) reads.push(Date.now()); };
  page.on('request', countRead);
  await page.evaluate('window.notReloaded = true');
  await page.getByLabel('Message').fill('!sleep 4000 that took a while');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await page.getByText('The agent is working on it').waitFor();
  assert.equal(await page.locator('[data-chat-badge] .badge').textContent(), 'processing');
  await shoot(page, 'chat-processing');
  await page.getByText('You said: that took a while').waitFor({ timeout: 20_000 });
  page.off('request', countRead);
  assert.equal(await page.locator('[data-chat]').getAttribute('data-status'), 'idle');
  assert.equal(await page.evaluate('window.notReloaded'), true, 'not reloaded');
  const reply = await t.runtime.store.db.selectFrom('turns').select('ts').where('session_id', '=', chatSession)
    .where('text', '=', 'You said: that took a while').executeTakeFirstOrThrow();
  const repliedAt = Date.parse(reply.ts);
  assert.equal(reads.filter((at) => at < repliedAt).length, 1, `one read after sending, none while the agent worked: ${reads.map((at) => at - repliedAt)} ms from the reply`);
  assert.ok(reads.some((at) => at >= repliedAt), 'and one once the feed said the turn had ended');

  // Queued: the agent is busy with another conversation (through the API), so this message waits its turn.
  const busy = api('/messages', second, { method: 'POST', body: { text: '!sleep 3000 busy elsewhere' } });
  await agentBusy(agent!.agent_id);
  await page.getByLabel('Message').fill('are you there?');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await page.getByText('Queued: the agent is busy with something else').waitFor();
  assert.equal(await page.locator('[data-chat-badge] .badge').textContent(), 'queued');
  await shoot(page, 'chat-queued');
  await page.getByText('You said: are you there?').waitFor({ timeout: 20_000 });
  assert.equal(await page.locator('[data-chat]').getAttribute('data-status'), 'idle');
  assert.equal((await busy).status, 200);
  await shoot(page, 'chat', { dark: true });

  // A turn that leaves something for this person to settle says "waiting for you", with the way to
  // the inbox and to the action itself; the header's badge says it too.
  const waitingNote = page.locator('[data-chat-waiting]');
  assert.equal(await waitingNote.isVisible(), false);
  await page.getByLabel('Message').fill('!action email Send the chat summary');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await waitingNote.getByText('1 action to approve or reject').waitFor();
  const { actions: [summary] } = await t.runtime.services.missions.listActions(user!.id, { sessionId: chatSession });
  assert.equal(await waitingNote.getByRole('link', { name: 'the inbox' }).getAttribute('href'), '/inbox');
  await page.locator(`[data-awaiting="${summary!.operation_id}"]`).getByRole('heading', { name: 'Send the chat summary' }).waitFor();
  assert.equal(await page.getByRole('status').filter({ hasText: 'Waiting for you' }).count(), 1, 'said in a live region');
  assert.equal(await page.locator('[data-chat-badge] .badge').textContent(), 'waiting for you');
  await shoot(page, 'chat-waiting');

  // The conversations list says so of this conversation (in another tab: this one stays open).
  const elsewhere = await context.newPage();
  elsewhere.setDefaultTimeout(15_000);
  const chatRow = elsewhere.locator('tr', { hasText: chatSession });
  await elsewhere.goto(`${base}/conversations`);
  assert.equal(await chatRow.locator('td[data-label="Status"] .badge').textContent(), 'waiting for you');
  await shoot(elsewhere, 'conversations-waiting');

  // Approved in the inbox of that tab: this one learns it by itself, without a reload, and shows
  // the agent going on; the list no longer says it waits.
  await elsewhere.goto(`${base}/inbox`);
  await elsewhere.getByRole('button', { name: 'Approve “Send the chat summary”' }).click();
  await elsewhere.getByText('Approved. The agent carries on.').waitFor();
  await page.getByText('Done: Send the chat summary').waitFor();
  await waitingNote.waitFor({ state: 'hidden' });
  assert.equal(await page.locator('[data-chat-badge] .badge').textContent(), 'idle');
  assert.equal(await page.evaluate('window.notReloaded'), true, 'not reloaded');
  await elsewhere.goto(`${base}/conversations`);
  assert.equal(await chatRow.locator('td[data-label="Status"] .badge').textContent(), 'idle');

  // A hidden tab lets go of its stream, and reads nothing while hidden; shown again, it follows
  // anew and reads what happened meanwhile (here: a message to this conversation through the API).
  const hide = (hidden: boolean) => page.evaluate(`(() => {
    if (${hidden}) for (const [name, value] of [['hidden', true], ['visibilityState', 'hidden']]) Object.defineProperty(document, name, { configurable: true, get: () => value });
    else { delete document.hidden; delete document.visibilityState; }
    document.dispatchEvent(new Event('visibilitychange'));
  })()`);
  const asked: string[] = [];
  const countAsk = (request: { url(): string }) => { if (/\/messages\.json|\/events\/stream/.test(request.url())) asked.push(new URL(request.url()).pathname); };
  page.on('request', countAsk);
  await hide(true);
  assert.equal((await api('/messages', second, { method: 'POST', body: { text: 'sent while hidden', session_id: chatSession } })).status, 200);
  await page.waitForTimeout(1_000);
  assert.deepEqual(asked, [], 'nothing asked while hidden');
  assert.equal(await page.getByText('You said: sent while hidden').count(), 0);
  const following = page.waitForRequest(/\/events\/stream/);
  await hide(false);
  await following;
  await page.getByText('You said: sent while hidden').waitFor();
  page.off('request', countAsk);
  await elsewhere.close();

  // A turn the agent fails on is marked "failed" in words, its code in the title.
  await page.getByLabel('Message').fill('!fail');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  const failedMark = page.locator('.msg-error .badge');
  await failedMark.waitFor();
  assert.equal(await failedMark.textContent(), 'failed');
  assert.equal(await failedMark.getAttribute('title'), 'Error code: agent_failed');

  // A message longer than the server allows is stopped in the browser; one at the limit in
  // characters (though longer in UTF-16 units, as maxlength would count) is not.
  const atLimit = '😀'.repeat(32_000);
  await page.getByLabel('Message').fill(atLimit + '😀');
  assert.equal(await page.getByLabel('Message').evaluate((el) => (el as unknown as { checkValidity(): boolean }).checkValidity()), false);
  await page.getByLabel('Message').fill(atLimit);
  assert.equal(await page.getByLabel('Message').evaluate((el) => (el as unknown as { checkValidity(): boolean }).checkValidity()), true);
  assert.equal(await page.getByLabel('Message').inputValue().then((v) => v.length), 64_000, 'nothing was cut off');

  // A message the server refuses (here: this person's allowance a minute is used up) is said in
  // the red error box that the page without a script shows, and announced; the text stays.
  const allowance = t.config.webChatRateLimitPerMinute;
  while ((await t.runtime.rateLimiter.take(`web-chat:${user!.id}`, allowance)).allowed);
  await page.getByLabel('Message').fill('one too many');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  const refusal = page.getByRole('alert');
  await refusal.getByText(`You have sent ${allowance} messages in the last minute`).waitFor();
  assert.match(await refusal.getAttribute('class') ?? '', /\bnotice-error\b/);
  assert.equal(await page.getByLabel('Message').inputValue(), 'one too many');
  assert.equal(await page.title(), 'Error: Chat with Report bot · agent-channel');
  await shoot(page, 'chat-refused');
  await page.getByLabel('Message').fill('');

  await page.goto(`${base}/`);
  await shoot(page, 'overview');

  // On a phone the five navigation entries share one row, and the signed-in email shows.
  await page.setViewportSize(PHONE);
  const navTops = await page.locator('.nav-main a').evaluateAll((links) => links.map((a) => Math.round(a.getBoundingClientRect().top)));
  assert.equal(navTops.length, 5);
  assert.equal(new Set(navTops).size, 1, `one row: ${navTops.join(',')}`);
  assert.ok((await page.locator('a.who').boundingBox())!.width > 40, 'the email is shown (shortened if need be)');
  await page.setViewportSize(DESKTOP);

  // Log out; then too many wrong passwords get the 429 page.
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByText('You are logged out.').waitFor();
  for (let i = 0; i < 5; i++) {
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('not my password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByText('That email and password do not match an account.').waitFor();
    if (i === 0) await shoot(page, 'login-refused');
  }
  await page.getByLabel('Password').fill('a browser password');
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByText(/Too many failed attempts\. Try again in \d+ minutes?\./).waitFor();
  await shoot(page, 'login-throttled');
  assert.deepEqual(problems, [], 'no script errors on any page');
  await page.close();
});

test('the main flows work by keyboard alone, in a sensible order, focus always shown', { skip, timeout: 90_000 }, async () => {
  const keyboard = await openBrowser('keyboard');
  const ctx = keyboard.context;
  try {
    const page = await ctx.newPage();
    page.setDefaultTimeout(15_000);
    const email = `keyboard-${Date.now()}@example.test`;

    // Sign up: from the top of the page, the header, then the form in reading order; back with Shift+Tab.
    await page.goto(`${base}/signup`);
    assert.deepEqual(await pressUntil(page, 'button "Sign up"'), [
      'link "Skip to content"', 'link "agent-channel"', 'link "Log in"', 'link "Sign up"', 'textbox "Email"', 'textbox "Password"', 'button "Sign up"',
    ]);
    assert.deepEqual(await pressUntil(page, 'textbox "Email"', 'Shift+Tab'), ['textbox "Password"', 'textbox "Email"']);
    await page.keyboard.type(email);
    await page.keyboard.press('Tab');
    await page.keyboard.type('a keyboard password');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/agents\?welcome=1$/);

    // The skip link leads past the header: the next Tab is in the page's content.
    assert.deepEqual(await pressUntil(page, 'link "Skip to content"'), ['link "Skip to content"']);
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate('document.activeElement.id'), 'main');
    const [firstInMain] = await pressUntil(page, 'textbox "Name"');
    assert.ok(await page.evaluate("document.querySelector('main').contains(document.activeElement)"), `${firstInMain} is in the content`);
    await page.keyboard.type('Keyboard bot');
    await pressUntil(page, 'button "Create agent"');
    await page.keyboard.press('Space');
    await page.getByText('Agent “Keyboard bot” is ready').waitFor();

    // A key: created with Enter, copied with Space (the Copy button comes before the form), revoked
    // behind its confirmation.
    await page.goto(`${base}/account/keys`);
    await pressUntil(page, 'textbox "Label"');
    await page.keyboard.type('keyboard key');
    await pressUntil(page, 'button "Create key"');
    await page.keyboard.press('Enter');
    await page.locator('#new-key').waitFor();
    const toCopy = await pressUntil(page, 'button "Copy the key"');
    assert.ok(!toCopy.includes('textbox "Label"'), `the new key's Copy button comes before the form: ${toCopy.join(' → ')}`);
    await page.keyboard.press('Space');
    await page.getByRole('status').filter({ hasText: /^(Copied\.|Selected: press Ctrl\+C to copy\.)$/ }).waitFor();
    await pressUntil(page, 'link "Revoke keyboard key"');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Revoke “keyboard key”?' }).waitFor();
    assert.deepEqual((await pressUntil(page, 'link "Cancel"')).slice(-2), ['button "Revoke key"', 'link "Cancel"']);
    await pressUntil(page, 'button "Revoke key"', 'Shift+Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('status').getByText('is revoked').waitFor();

    // Chat: the transcript's box takes focus (to scroll it), then the form; the message is sent
    // from the Send button, and focus is back in the field for the next one.
    await page.goto(`${base}/chat`);
    const toMessage = await pressUntil(page, 'textbox "Message"');
    assert.deepEqual(toMessage.slice(-3), ['region "Transcript"', 'combobox "Agent"', 'textbox "Message"']);
    await page.keyboard.type('hello by keyboard');
    await pressUntil(page, 'button "Send"');
    await page.keyboard.press('Enter');
    await page.getByText('You said: hello by keyboard').waitFor();
    assert.equal(await focused(page), 'textbox "Message"');
    // An action to approve: Ctrl+Enter sends it; the chat then leads to the inbox.
    await page.keyboard.type('!action email Send the keyboard report');
    await page.keyboard.press('Control+Enter');
    await page.locator('[data-chat-waiting]').getByText('1 action to approve or reject').waitFor();
    await pressUntil(page, 'link "the inbox"', 'Shift+Tab');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/inbox$/);
    await pressUntil(page, 'button "Approve “Send the keyboard report”"');
    await page.keyboard.press('Enter');
    await page.getByText('Approved. The agent carries on.').waitFor();
  } finally {
    await keyboard.close();
  }
});

test('the pages work without JavaScript (forms post; the chat offers a link to the reply and never reloads by itself)', { skip, timeout: 90_000 }, async () => {
  // A second fresh profile, with JavaScript off.
  const noScript = await openBrowser('nojs', { javaScriptEnabled: false });
  const ctx = noScript.context;
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

    // A new key: all of it in view, and no Copy button that could do nothing.
    await page.goto(`${base}/account/keys`);
    await page.getByLabel('Label').fill('plain key');
    await page.getByRole('button', { name: 'Create key' }).click();
    assert.match((await page.locator('#new-key').textContent())!.trim(), /^ak_[A-Za-z0-9]+_[A-Za-z0-9]{43}$/);
    assert.equal(await page.getByRole('button', { name: 'Copy the key' }).isVisible(), false, 'no script, no copy button');
    await wholeKeyInView(page);
    await page.goto(`${base}/chat`);
    await page.getByLabel('Message').fill('!sleep 7000 patience');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    // The post waits up to the ceiling (5 s here), then the page shows the turn running, with a
    // link to look again. It does not reload by itself: a message being written stays, and so does focus.
    await page.getByText('The agent is working on it').waitFor({ timeout: 20_000 });
    const shownAt = page.url();
    await page.getByLabel('Message').fill('a half-written');
    await page.waitForTimeout(3_000); // past the reply (7 s after sending), and past the 2 s the page used to reload after
    assert.equal(await page.getByLabel('Message').inputValue(), 'a half-written', 'the draft is still there');
    assert.equal(await page.evaluate('document.activeElement.id'), 'chat-text', 'and still has focus');
    assert.equal(await page.getByText('You said: patience').count(), 0, 'the page did not reload');
    assert.equal(page.url(), shownAt);
    for (let tries = 0; await page.getByText('You said: patience').count() === 0; tries++) {
      assert.ok(tries < 20, 'the reply shows');
      await page.getByRole('link', { name: 'Show the reply' }).click();
      await page.waitForLoadState();
    }
    assert.equal(await page.getByRole('link', { name: 'Show the reply' }).count(), 0, 'once the turn has ended, nothing to show');
    assert.equal(await page.getByText('Ctrl+Enter sends').isVisible(), false, 'no script, no shortcut to offer');

    // A conversation taller than the transcript's box opens at its newest message, script or not.
    for (let i = 1; i <= 4; i++) {
      await page.getByLabel('Message').fill(Array.from({ length: 8 }, (_, line) => `message ${i}, line ${line + 1}`).join('\n'));
      await page.getByRole('button', { name: 'Send', exact: true }).click();
      await page.getByText(`You said: message ${i}, line 1`).waitFor();
    }
    const transcript = page.getByRole('region', { name: 'Transcript' });
    const [box, newest] = [await transcript.boundingBox(), await page.locator('.msg').last().boundingBox()];
    assert.ok(box && newest);
    assert.ok(await transcript.evaluate((el) => el.scrollHeight > el.clientHeight), 'the conversation is taller than its box');
    assert.ok(newest.y >= box.y - 1 && newest.y + newest.height <= box.y + box.height + 1,
      `the newest message (${newest.y}–${newest.y + newest.height}) is within the box (${box.y}–${box.y + box.height})`);
    assert.match(await page.locator('.msg').last().innerText(), /You said: message 4/);
    assert.deepEqual(await page.evaluate(STRUCTURE_CHECK), [], 'structure of the long chat');
    assert.deepEqual(await axeOnCopy(context, page), [], 'axe on the long chat, without JavaScript');
  } finally {
    await noScript.close();
  }
});
