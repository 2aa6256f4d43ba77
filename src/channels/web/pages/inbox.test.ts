import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API, startTestApp, type TestApp, type TestUser } from '../../../testing/harness.ts';
import { WebClient } from '../../../testing/web-client.ts';
import { memberOfOwnersWorkspace } from '../../../testing/missions.ts';

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

interface Sent { session_id: string; reply: string }

async function say(user: TestUser, text: string, sessionId?: string): Promise<Sent> {
  const res = await t.inject({ method: 'POST', url: `${API}/messages`, headers: user.auth, payload: { text, ...(sessionId ? { session_id: sessionId } : {}) } });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

async function signedIn(): Promise<{ user: TestUser & { agentId: string }; web: WebClient }> {
  const user = await t.userWithAgent({ agentName: 'Inbox bot' });
  const web = new WebClient(t);
  await web.login(user.email, user.password);
  return { user, web };
}

/** Waits until the session's transcript has an agent turn with this text. */
async function agentSays(user: TestUser, sessionId: string, text: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { messages } = await t.runtime.services.conversations.transcript(user.id, sessionId, { limit: 200 });
    if (messages.some((m) => m.role === 'agent' && m.text === text)) return;
    if (Date.now() > deadline) throw new Error(`no agent turn "${text}" in ${JSON.stringify(messages)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const opIdIn = (reply: string) => /op_[A-Za-z0-9]+/.exec(reply)![0];
const reqIdIn = (reply: string) => /req_[A-Za-z0-9]+/.exec(reply)![0];

test('happy: an empty inbox says so', async () => {
  const { web } = await signedIn();
  const res = await web.get('/inbox');
  assert.equal(res.statusCode, 200);
  assert.match(res.body, /Nothing to approve/);
  assert.match(res.body, /No open questions/);
});

test('happy: the overview counts what waits in the inbox, across conversations', async () => {
  const { user, web } = await signedIn();
  const tile = async () => /<span class="tile-num">(\d+)<\/span><span>waiting in the inbox<\/span>/.exec((await web.get('/')).body)?.[1];
  assert.equal(await tile(), '0');
  await say(user, '!action email Send the report');
  await say(user, '!ask number How many copies?');
  assert.equal(await tile(), '2');
});

test('a long inbox shows the oldest 200 actions, counts them all, and says the rest come as these are settled', async () => {
  const { user, web } = await signedIn();
  const first = await say(user, '!action email Mail number 1');
  for (let n = 2; n <= 201; n++) await say(user, `!action email Mail number ${n}`, first.session_id);
  const page = await web.get('/inbox');
  assert.equal(page.statusCode, 200);
  assert.equal(page.body.match(/<li class="card item" id="op_/g)?.length, 200);
  assert.match(page.body, /Actions waiting for your permission <span class="count">201<\/span>/);
  assert.match(page.body, /The oldest 200 are shown; the rest appear here as you settle these\./);
  assert.match(page.body, /Mail number 1</);
  assert.ok(!page.body.includes('Mail number 201<'), 'the newest is not on the page');
  const overview = await web.get('/');
  assert.match(overview.body, /<span class="tile-num">201<\/span><span>waiting in the inbox/);
});

test('happy: approve a pending action; the agent carries on', async () => {
  const { user, web } = await signedIn();
  const sent = await say(user, '!action email Send the report');
  const op = opIdIn(sent.reply);
  const page = await web.get('/inbox');
  assert.match(page.body, new RegExp(`<li class="card item" id="${op}">`));
  assert.match(page.body, /<h3 class="item-title">Send the report<\/h3>/);
  assert.match(page.body, /<span class="badge badge-kind">email<\/span>/);
  const res = await web.post(`/inbox/actions/${op}`, { decision: 'approve', reason: '' });
  assert.equal(res.statusCode, 303);
  const after = await web.get(String(res.headers.location));
  assert.match(after.body, /Approved\. The agent carries on\./);
  assert.match(after.body, /<title>Inbox · agent-channel<\/title>/);
  assert.match(after.body, /Nothing to approve/);
  await agentSays(user, sent.session_id, 'Done: Send the report');
});

test('happy: approve all of this kind approves the other pending ones of the same agent', async () => {
  const { user, web } = await signedIn();
  const first = await say(user, '!action email First mail');
  const second = await say(user, '!action email Second mail');
  const other = await say(user, '!action sms A text message');
  await web.get('/inbox');
  const res = await web.post(`/inbox/actions/${opIdIn(first.reply)}`, { decision: 'approve_same_type' });
  assert.equal(res.statusCode, 303);
  const after = await web.get(String(res.headers.location));
  assert.match(after.body, /Approved 2 actions/);
  assert.ok(!after.body.includes(opIdIn(second.reply)));
  assert.ok(after.body.includes(opIdIn(other.reply)), 'another kind stays pending');
  await agentSays(user, second.session_id, 'Done: Second mail');
});

test('happy: reject with a reason re-plans, without one the mission stops', async () => {
  const { user, web } = await signedIn();
  const a = await say(user, '!action email Mail the board');
  const b = await say(user, '!action payment Pay the invoice');
  await web.get('/inbox');
  const withReason = await web.post(`/inbox/actions/${opIdIn(a.reply)}`, { decision: 'reject', reason: 'not before Monday' });
  assert.equal(withReason.statusCode, 303);
  assert.match((await web.get(String(withReason.headers.location))).body, /Rejected\. The agent has been told\./);
  await agentSays(user, a.session_id, 'Re-planned: not before Monday');
  await web.post(`/inbox/actions/${opIdIn(b.reply)}`, { decision: 'reject', reason: '' });
  await agentSays(user, b.session_id, 'Stopped.');
});

test('the reason field belongs to a reject form of its own: Enter in it rejects, never approves', async () => {
  const { user, web } = await signedIn();
  const sent = await say(user, '!action email Check the forms');
  const op = opIdIn(sent.reply);
  const page = await web.get('/inbox');
  const card = new RegExp(`<li class="card item" id="${op}">([\\s\\S]*?)</li>`).exec(page.body)![1]!;
  const forms = [...card.matchAll(/<form [^>]*>([\s\S]*?)<\/form>/g)].map((m) => m[1]!);
  assert.equal(forms.length, 2);
  const [approve, reject] = forms as [string, string];
  assert.doesNotMatch(approve, /name="reason"/, 'no text field in the approve form: Enter cannot submit it');
  assert.match(approve, /name="decision" value="approve"/);
  assert.match(reject, /<input type="hidden" name="decision" value="reject">/);
  assert.match(reject, new RegExp(`<input id="reason-${op}" name="reason" type="text"`));
  assert.equal([...reject.matchAll(/type="submit"/g)].length, 1, 'its only button is Reject');
  assert.match(reject, /<button type="submit" class="btn btn-danger-quiet">Reject<span class="sr-only"> “Check the forms”<\/span><\/button>/);
  // What Enter in the field sends: the form's fields, without a button's name.
  const res = await web.post(`/inbox/actions/${op}`, { decision: 'reject', reason: 'wrong recipient' });
  assert.equal(res.headers.location, '/inbox?done=rejected&n=1');
  await agentSays(user, sent.session_id, 'Re-planned: wrong recipient');
});

/** The text of the element with this id in `html`, its nested elements' text included. */
function textOf(html: string, id: string): string {
  const open = new RegExp(`<(\\w+)[^>]* id="${id}"[^>]*>`).exec(html)!;
  const tag = open[1]!;
  let depth = 1;
  let at = open.index + open[0].length;
  const from = at;
  const tags = new RegExp(`<(/?)${tag}\\b[^>]*>`, 'g');
  tags.lastIndex = at;
  for (let m = tags.exec(html); m; m = tags.exec(html)) {
    depth += m[1] ? -1 : 1;
    if (depth === 0) { at = m.index; break; }
  }
  return html.slice(from, at).replace(/<[^>]+>/g, '').trim();
}

test("every card's controls say, to a screen reader, which card they belong to; the answer field is described by its question", async () => {
  const { user, web } = await signedIn();
  const report = opIdIn((await say(user, '!action email Send the report')).reply);
  const digest = opIdIn((await say(user, '!action email Send the digest')).reply);
  const copies = reqIdIn((await say(user, '!ask number How many copies?')).reply);
  const colour = reqIdIn((await say(user, '!ask choice:red|blue Which colour?')).reply);
  const page = (await web.get('/inbox')).body;
  const card = (id: string) => new RegExp(`<li class="card item" id="${id}">([\\s\\S]*?)</li>`).exec(page)![1]!;
  // What a screen reader names each control by: its text, hidden parts included.
  const names = (html: string, pattern: RegExp) => [...html.matchAll(pattern)].map((m) => m[1]!.replace(/<[^>]+>/g, '').trim());
  for (const [id, title] of [[report, 'Send the report'], [digest, 'Send the digest']] as const) {
    const html = card(id);
    assert.match(html, new RegExp(`<h3 class="item-title">${title}</h3>`), 'the card title is a heading under the section\'s h2');
    assert.deepEqual(names(html, /<button type="submit"[^>]*value="approve" [^>]*>([\s\S]*?)<\/button>/g), [`Approve “${title}”`]);
    assert.deepEqual(names(html, /<button type="submit" class="btn btn-danger-quiet">([\s\S]*?)<\/button>/g), [`Reject “${title}”`]);
    assert.deepEqual(names(html, /<label for="reason-[^"]+">([\s\S]*?)<span class="muted">/g), [`Reason for rejecting “${title}”`]);
    assert.deepEqual(names(html, /<a href="\/conversations\/[^"]+">([\s\S]*?)<\/a>/g), [`conversation “${title}”`]);
  }
  for (const [id, title, expects] of [[copies, 'How many copies?', 'Expects a number'], [colour, 'Which colour?', 'Expects one of: red, blue']] as const) {
    const html = card(id);
    assert.deepEqual(names(html, /<label for="answer-[^"]+">([\s\S]*?)<\/label>/g), [`Your answer “${title}”`]);
    assert.deepEqual(names(html, /<button type="submit" class="btn">([\s\S]*?)<\/button>/g), [`Answer “${title}”`]);
    const describedBy = new RegExp(`<input id="answer-${id}"[^>]* aria-describedby="([^"]+)"`).exec(html)![1]!.split(' ');
    const description = describedBy.map((ref) => textOf(html, ref)).join(' ');
    assert.equal(description, `${title} ${expects}`);
  }
  assert.ok(page.indexOf('<h2 id="actions-h">') < page.indexOf('<h3'), 'h3 cards follow their h2');
});

test('happy/error: a refused answer shows the agent\'s reason and keeps the question open; a fitting one is accepted', async () => {
  const { user, web } = await signedIn();
  const asked = await say(user, '!ask yesno Proceed with the launch?');
  const req = reqIdIn(asked.reply);
  const page = await web.get('/inbox');
  assert.match(page.body, new RegExp(`<h3 class="item-title" id="${req}-text">Proceed with the launch\\?</h3>`));
  assert.match(page.body, /asked of you/);
  const posted = await web.post(`/inbox/questions/${req}`, { text: 'perhaps' });
  assert.equal(posted.statusCode, 303, 'redirect after the post: a reload does not answer again');
  assert.equal(posted.headers.location, `/inbox?refused=${req}#${req}`);
  assert.ok(!JSON.stringify(posted.headers).includes('perhaps'), 'the answer travels sealed, not readable');
  const refused = await web.get(String(posted.headers.location).split('#')[0]!);
  assert.equal(refused.statusCode, 200);
  assert.match(refused.body, new RegExp(`id="answer-${req}-error" role="alert">Not accepted: A yes or no is missing: answer yes or no\\.</p>`));
  assert.match(refused.body, /value="perhaps"/, 'the answer stays in the field');
  assert.match(refused.body, /<title>Error: Inbox · agent-channel<\/title>/);
  assert.ok(refused.body.includes(`id="${req}"`), 'the question is still open');
  const reloaded = await web.get(String(posted.headers.location).split('#')[0]!);
  assert.doesNotMatch(reloaded.body, /Not accepted/, 'shown once');
  const accepted = await web.post(`/inbox/questions/${req}`, { text: 'yes' });
  assert.equal(accepted.statusCode, 303);
  const after = await web.get(String(accepted.headers.location));
  assert.match(after.body, /Answer accepted/);
  assert.match(after.body, /No open questions/);
  await agentSays(user, asked.session_id, 'Noted: yes');
});

test("a question put to you in someone else's conversation links it only for its owner, and says whose agent asks", async () => {
  const owner = await t.userWithAgent({ agentName: 'Owner bot' });
  const member = await memberOfOwnersWorkspace(t, owner);
  const asked = await say(owner, `!ask-user ${member.email} yesno Deploy on Friday?`);
  const req = reqIdIn(asked.reply);
  const memberWeb = new WebClient(t);
  await memberWeb.login(member.email, member.password);
  const card = (body: string) => new RegExp(`<li class="card item" id="${req}">([\\s\\S]*?)</li>`).exec(body)![1]!;
  const seenByMember = card((await memberWeb.get('/inbox')).body);
  assert.doesNotMatch(seenByMember, /href="\/conversations\//, 'no link that would open a 404');
  assert.equal((await memberWeb.get(`/conversations/${asked.session_id}`)).statusCode, 404, 'as it would');
  assert.match(seenByMember, new RegExp(`Owner bot · .* · asked of you by an agent of ${owner.email.replaceAll('.', '\\.')}&#39;s personal workspace, in a conversation that is not yours`));
  const ownerWeb = new WebClient(t);
  await ownerWeb.login(owner.email, owner.password);
  const seenByOwner = card((await ownerWeb.get('/inbox')).body);
  assert.match(seenByOwner, new RegExp(`<a href="/conversations/${asked.session_id}">conversation`));
  assert.match(seenByOwner, new RegExp(`asked of ${member.email.replaceAll('.', '\\.')}`));
});

test('error: a settled action and an unknown decision are explained', async () => {
  const { user, web } = await signedIn();
  const sent = await say(user, '!action email Once only');
  const op = opIdIn(sent.reply);
  await web.get('/inbox');
  assert.equal((await web.post(`/inbox/actions/${op}`, { decision: 'approve' })).statusCode, 303);
  await web.get('/inbox');
  // Errors are shown after a redirect too: a reload never posts the form again.
  const again = await web.post(`/inbox/actions/${op}`, { decision: 'reject' });
  assert.equal(again.statusCode, 303);
  assert.equal(again.headers.location, `/inbox?error=already_settled&op=${op}`);
  const late = (await web.get(String(again.headers.location))).body;
  assert.match(late, /role="alert">Your decision was not recorded: “Once only” was already approved\./);
  assert.match(late, /<title>Error: Inbox · agent-channel<\/title>/);
  const rejected = opIdIn((await say(user, '!action email Twice only')).reply);
  await web.post(`/inbox/actions/${rejected}`, { decision: 'reject' });
  const tooLate = await web.post(`/inbox/actions/${rejected}`, { decision: 'approve' });
  assert.match((await web.get(String(tooLate.headers.location))).body, /role="alert">Your decision was not recorded: “Twice only” was already rejected\./);
  // Closed without a decision: its conversation went away (as when deleted) before the decision came.
  const orphan = await say(user, '!action email Never decided');
  await t.runtime.store.db.deleteFrom('sessions').where('id', '=', orphan.session_id).execute();
  const closed = await web.post(`/inbox/actions/${opIdIn(orphan.reply)}`, { decision: 'approve' });
  assert.equal(closed.headers.location, `/inbox?error=not_found&op=${opIdIn(orphan.reply)}`);
  assert.match((await web.get(String(closed.headers.location))).body, /role="alert">Your decision was not recorded: “Never decided” was closed without a decision: its conversation or its agent is gone/);
  const weird = await web.post(`/inbox/actions/${op}`, { decision: 'maybe' });
  assert.equal(weird.headers.location, '/inbox?error=invalid_decision');
  assert.match((await web.get(String(weird.headers.location))).body, /Choose approve, approve all of this kind, or reject/);
  const blank = await say(user, '!ask text What colour?');
  const req = reqIdIn(blank.reply);
  const empty = await web.post(`/inbox/questions/${req}`, { text: '  ' });
  assert.equal(empty.statusCode, 303);
  assert.match((await web.get(`/inbox?refused=${req}`)).body, /Not accepted: Write an answer first\./);
  // An error code that is not ours shows nothing (the URL cannot put words on the page).
  const made = await web.get('/inbox?error=constructor');
  assert.equal(made.statusCode, 200);
  assert.doesNotMatch(made.body, /role="alert"/);
});

test("security: another account's action and question are not found and stay unsettled", async () => {
  const owner = await t.userWithAgent();
  const action = await say(owner, '!action email Private mail');
  const question = await say(owner, '!ask yesno Private question?');
  const { web } = await signedIn();
  const page = await web.get('/inbox');
  assert.ok(!page.body.includes('Private mail'));
  assert.ok(!page.body.includes('Private question'));
  const decide = await web.post(`/inbox/actions/${opIdIn(action.reply)}`, { decision: 'approve' });
  assert.equal(decide.headers.location, `/inbox?error=not_found&op=${opIdIn(action.reply)}`);
  const refused = (await web.get(String(decide.headers.location))).body;
  assert.match(refused, /no pending action with this id/);
  assert.ok(!refused.includes('Private mail'), 'another account\'s action is not named');
  const answer = await web.post(`/inbox/questions/${reqIdIn(question.reply)}`, { text: 'yes' });
  assert.equal(answer.headers.location, '/inbox?error=question_not_found');
  assert.match((await web.get(String(answer.headers.location))).body, /no open question with this id/);
  const { actions } = await t.runtime.services.missions.listActions(owner.id);
  const { questions } = await t.runtime.services.missions.listQuestions(owner.id);
  assert.equal(actions.length, 1);
  assert.equal(questions.length, 1);
  // Nor once it is settled: the page names only your own.
  await t.runtime.services.missions.decide(owner.id, [{ operation_id: opIdIn(action.reply), decision: 'approve' }]);
  const settled = (await web.get(`/inbox?error=already_settled&op=${opIdIn(action.reply)}`)).body;
  assert.ok(!settled.includes('Private mail'));
  assert.match(settled, /This action was already settled\./);
});

test('security: HTML in action summaries and question texts is escaped; decisions need the token', async () => {
  const { user, web } = await signedIn();
  const sent = await say(user, '!action email <script>alert(1)</script>');
  await say(user, '!ask text <img src=x onerror=alert(2)>?');
  const page = await web.get('/inbox');
  assert.ok(!page.body.includes('<script>alert(1)'));
  assert.ok(!page.body.includes('<img src=x'));
  assert.ok(page.body.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
  assert.ok(page.body.includes('&lt;img src=x onerror=alert(2)&gt;?'));
  web.csrf = 'nope';
  const forged = await web.post(`/inbox/actions/${opIdIn(sent.reply)}`, { decision: 'approve' });
  assert.equal(forged.statusCode, 403);
  const cross = await web.post(`/inbox/actions/${opIdIn(sent.reply)}`, { decision: 'approve' }, { 'sec-fetch-site': 'cross-site' });
  assert.equal(cross.statusCode, 403);
  assert.equal((await t.runtime.services.missions.listActions(user.id)).actions.length, 1, 'still pending');
});
