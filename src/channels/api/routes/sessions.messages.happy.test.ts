import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send, transcript } from '../../../testing/conversation.ts';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 10_000, duplicateWindowMs: 0 }); });
after(async () => { await t.close(); });

test('pages with after and limit, oldest first, has_more until the end', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'm0' })).json().session_id;
  for (let i = 1; i < 5; i++) await send(t, u, { text: `m${i}`, session_id: sessionId });
  const all = (await transcript(t, u, sessionId)).json();
  assert.equal(all.messages.length, 10);
  assert.equal(all.has_more, false);
  assert.equal(all.status, 'idle');
  assert.equal(all.agent_id, u.agentId);
  const seen: string[] = [];
  let after = '';
  for (;;) {
    const page = (await transcript(t, u, sessionId, `limit=3${after ? `&after=${encodeURIComponent(after)}` : ''}`)).json();
    seen.push(...page.messages.map((m: any) => m.ts));
    if (!page.has_more) break;
    after = page.messages.at(-1).ts;
  }
  assert.deepEqual(seen, all.messages.map((m: any) => m.ts));
  assert.deepEqual([...seen].sort(), seen, 'string order is time order');
});

test('has_more is false when a page ends at the last turn, true when one more follows', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'one' })).json().session_id;
  await send(t, u, { text: 'two', session_id: sessionId });
  const all = (await transcript(t, u, sessionId)).json().messages.map((m: any) => m.ts);
  assert.equal(all.length, 4);
  const page = async (query: string) => {
    const body = (await transcript(t, u, sessionId, query)).json();
    return { ts: body.messages.map((m: any) => m.ts), has_more: body.has_more };
  };
  assert.deepEqual(await page('limit=4'), { ts: all, has_more: false });
  assert.deepEqual(await page('limit=3'), { ts: all.slice(0, 3), has_more: true });
  const after = `after=${encodeURIComponent(all[0])}`;
  assert.deepEqual(await page(`${after}&limit=3`), { ts: all.slice(1), has_more: false });
  assert.deepEqual(await page(`${after}&limit=2`), { ts: all.slice(1, 3), has_more: true });
  assert.deepEqual(await page(`after=${encodeURIComponent(all[3])}&limit=1`), { ts: [], has_more: false });
});

test('every ts is unique, strictly increasing and in the contract format, also under concurrent sends', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'start' }, { Prefer: 'wait=0' })).json().session_id;
  await Promise.all(Array.from({ length: 30 }, (_, i) => send(t, u, { text: `c${i}`, session_id: sessionId }, { Prefer: 'wait=0' })));
  let page: any;
  for (let i = 0; i < 300; i++) {
    page = (await transcript(t, u, sessionId, 'limit=200')).json();
    if (page.status === 'idle' && page.messages.length === 62) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(page.messages.length, 62);
  const ts = page.messages.map((m: any) => m.ts);
  for (const value of ts) assert.match(value, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
  for (let i = 1; i < ts.length; i++) assert.ok(ts[i] > ts[i - 1], `${ts[i]} after ${ts[i - 1]}`);
});

test('cursor paging never skips or repeats a turn while turns are being written', async () => {
  const u = await t.userWithAgent();
  const sessionId = (await send(t, u, { text: 'w0' })).json().session_id;
  let writing = true;
  const writer = (async () => {
    for (let i = 1; i <= 40; i++) await send(t, u, { text: `w${i}`, session_id: sessionId }, { Prefer: 'wait=0' });
    writing = false;
  })();
  const seen: string[] = [];
  let after = '';
  for (let rounds = 0; rounds < 5000; rounds++) {
    await new Promise((r) => setTimeout(r, 2)); // let the runner (timers, I/O) have its turn
    // Only a page asked for after the last send returned may end the loop: "idle" speaks for
    // the jobs that existed when the request was made.
    const allSent = !writing;
    const page = (await transcript(t, u, sessionId, `limit=7${after ? `&after=${encodeURIComponent(after)}` : ''}`)).json();
    seen.push(...page.messages.map((m: any) => m.ts));
    if (page.messages.length) after = page.messages.at(-1).ts;
    if (allSent && !page.has_more && page.status === 'idle') {
      const final = (await transcript(t, u, sessionId, `after=${encodeURIComponent(after)}`)).json();
      if (final.messages.length === 0) break;
    }
  }
  await writer;
  const full = (await transcript(t, u, sessionId, 'limit=200')).json().messages.map((m: any) => m.ts);
  assert.equal(full.length, 82);
  assert.deepEqual(seen, full);
});

test('status: processing while its turn runs, queued while it waits behind another, idle once done', async () => {
  const u = await t.userWithAgent();
  const busy = (await send(t, u, { text: '!sleep 800 first' }, { Prefer: 'wait=0' })).json();
  // A new session of the same agent: its turn waits in the agent's line.
  const waiting = (await send(t, u, { text: 'second' }, { Prefer: 'wait=0' })).json();
  assert.equal((await transcript(t, u, busy.session_id)).json().status, 'processing');
  assert.equal((await transcript(t, u, waiting.session_id)).json().status, 'queued');
  let page: any;
  for (let i = 0; i < 200; i++) {
    page = (await transcript(t, u, waiting.session_id)).json();
    if (page.status === 'idle') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(page.status, 'idle');
  assert.deepEqual(page.messages.map((m: any) => m.role), ['user', 'agent'], 'idle: the reply is on the page');
});
