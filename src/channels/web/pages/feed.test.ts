import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MAX_STREAMS_PER_HOLDER } from '../../event-streams.ts';
import { isStream, openStream, type EventStream } from '../../../testing/event-stream.ts';
import { API, startTestApp, type TestApp } from '../../../testing/harness.ts';
import { signedUpWithAgent, WebClient } from '../../../testing/web-client.ts';

let t: TestApp;
let base: string;
before(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  assert.ok(address && typeof address === 'object');
  base = `http://127.0.0.1:${address.port}`;
});
after(async () => { await t.close(); });

/** The signed-in person's /events/stream, as a browser's EventSource opens it (their cookie). */
const openFeed = (app: string, cookie: string) => openStream(`${app}/events/stream`, { cookie });

async function feedStream(app: string, cookie: string): Promise<EventStream> {
  const opened = await openFeed(app, cookie);
  assert.ok(isStream(opened), `not a stream: ${opened.response.status}`);
  assert.equal(opened.response.status, 200);
  return opened;
}

/** The stream's events from the `from`th on, once `count` of them have come; each carries data alone (see feed.ts). */
async function eventsOf(stream: EventStream, from: number, count: number): Promise<any[]> {
  const events = (await stream.untilEvents(from + count)).slice(from);
  for (const event of events) assert.deepEqual([event.id, event.event], [undefined, undefined], 'no id: or event: line');
  return events.map((event) => event.json);
}

test('the feed stream is for a signed-in person only: 401 without a session, never the log-in page', async () => {
  const anonymous = await t.inject({ method: 'GET', url: '/events/stream', headers: { accept: 'text/event-stream' } });
  assert.equal(anonymous.statusCode, 401);
  assert.deepEqual(anonymous.json(), { error: 'not_signed_in', message: 'Log in again.' });
  const stale = await t.inject({ method: 'GET', url: '/events/stream', headers: { accept: 'text/event-stream', cookie: 'ac_session=NoSuchSession1' } });
  assert.equal(stale.statusCode, 401);
});

test('a conversation\'s events reach its person\'s open streams as they happen, and nobody else\'s', async () => {
  const { web, agentId } = await signedUpWithAgent(t);
  const stranger = await signedUpWithAgent(t);
  const opening = Date.now();
  const stream = await feedStream(base, web.cookieHeader());
  // Open at once, not at the first event or heartbeat (10 s): the page reads the conversation once its stream is open.
  assert.ok(Date.now() - opening < 5_000, `open in ${Date.now() - opening} ms`);
  const theirs = await feedStream(base, stranger.web.cookieHeader());
  try {
    const sent = await web.post('/chat', { agent_id: agentId, text: 'hello feed' });
    const sessionId = String(sent.headers.location).split('=')[1]!;
    const [turn] = await eventsOf(stream, 0, 1);
    assert.equal(turn.type, 'turn.completed');
    assert.equal(turn.session_id, sessionId);
    assert.equal(turn.data.text, 'You said: hello feed');

    await web.post('/chat', { session_id: sessionId, text: '!action email Send the feed report' });
    const types = (await eventsOf(stream, 1, 2)).map((event) => event.type).sort();
    assert.deepEqual(types, ['action.pending', 'turn.completed']);

    // The stranger's stream carries only the stranger's events: their own turn is the first it sees.
    const own = await stranger.web.post('/chat', { agent_id: stranger.agentId, text: 'mine' });
    const [first] = await eventsOf(theirs, 0, 1);
    assert.equal(first.session_id, String(own.headers.location).split('=')[1]);
  } finally {
    stream.close();
    theirs.close();
  }
});

test('a stream sends nothing more once its person has logged out: it ends at the next event', async () => {
  const u = await t.userWithAgent();
  const web = new WebClient(t);
  await web.login(u.email, u.password);
  const stream = await feedStream(base, web.cookieHeader());
  try {
    await web.post('/logout');
    const sent = await t.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text: 'after logout' } });
    assert.equal(sent.statusCode, 200);
    assert.deepEqual(await stream.ended, { clean: true });
    assert.deepEqual(stream.events, [], 'the stream ended without the event');
  } finally {
    stream.close();
  }
});

test(`a person holds at most ${MAX_STREAMS_PER_HOLDER} streams on an instance; one closed frees its place`, async () => {
  const { web } = await signedUpWithAgent(t);
  const streams = await Promise.all(Array.from({ length: MAX_STREAMS_PER_HOLDER }, () => feedStream(base, web.cookieHeader())));
  try {
    const refused = await openFeed(base, web.cookieHeader());
    assert.ok(!isStream(refused));
    assert.equal(refused.response.status, 429);
    // Someone else is not counted with them.
    const other = await feedStream(base, (await signedUpWithAgent(t)).web.cookieHeader());
    other.close();
    streams.pop()!.close();
    for (let tries = 0; ; tries++) {
      const again = await openFeed(base, web.cookieHeader());
      if (isStream(again)) {
        again.close();
        break;
      }
      assert.ok(tries < 50, 'the closed stream\'s place is given back');
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    for (const s of streams) s.close();
  }
});

test('open streams end as the server closes, at once, rather than holding its shutdown', async () => {
  const own = await startTestApp();
  try {
    await own.app.listen({ port: 0, host: '127.0.0.1' });
    const address = own.app.server.address();
    assert.ok(address && typeof address === 'object');
    const { web } = await signedUpWithAgent(own);
    const stream = await feedStream(`http://127.0.0.1:${address.port}`, web.cookieHeader());
    const started = Date.now();
    const closing = own.close();
    assert.deepEqual(await stream.ended, { clean: true }, 'the stream ended');
    await closing;
    assert.ok(Date.now() - started < 5_000, `closed in ${Date.now() - started} ms`);
  } finally {
    await own.close();
  }
});
