import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MAX_STREAMS_PER_HOLDER } from '../../event-streams.ts';
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

interface FeedEvent {
  id: string;
  type: string;
  session_id: string;
  data: Record<string, unknown>;
}

/** An open /events/stream as a browser's EventSource reads it: its events' data, one at a time. */
interface Stream {
  status: number;
  /** The next event, or null once the server has ended the stream. */
  next(timeoutMs?: number): Promise<FeedEvent | null>;
  close(): void;
}

async function openStream(app: string, cookie: string): Promise<Stream> {
  const hangUp = new AbortController();
  const res = await fetch(`${app}/events/stream`, { headers: { accept: 'text/event-stream', cookie }, signal: hangUp.signal });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  return {
    status: res.status,
    async next(timeoutMs = 10_000) {
      const deadline = setTimeout(() => hangUp.abort(), timeoutMs);
      try {
        for (;;) {
          const end = buffered.indexOf('\n\n');
          if (end >= 0) {
            const block = buffered.slice(0, end);
            buffered = buffered.slice(end + 2);
            const data = block.split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice(6)).join('\n');
            if (data) return JSON.parse(data) as FeedEvent; // else a heartbeat comment
            continue;
          }
          const { done, value } = await reader.read();
          if (done) return null;
          buffered += decoder.decode(value, { stream: true });
        }
      } finally {
        clearTimeout(deadline);
      }
    },
    close: () => hangUp.abort(),
  };
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
  const stream = await openStream(base, web.cookieHeader());
  // Open at once, not at the first event or heartbeat (10 s): the page reads the conversation once its stream is open.
  assert.ok(Date.now() - opening < 5_000, `open in ${Date.now() - opening} ms`);
  const theirs = await openStream(base, stranger.web.cookieHeader());
  try {
    assert.equal(stream.status, 200);
    const sent = await web.post('/chat', { agent_id: agentId, text: 'hello feed' });
    const sessionId = String(sent.headers.location).split('=')[1]!;
    const turn = await stream.next();
    assert.equal(turn?.type, 'turn.completed');
    assert.equal(turn?.session_id, sessionId);
    assert.equal(turn?.data.text, 'You said: hello feed');

    await web.post('/chat', { session_id: sessionId, text: '!action email Send the feed report' });
    const types = [(await stream.next())?.type, (await stream.next())?.type].sort();
    assert.deepEqual(types, ['action.pending', 'turn.completed']);

    // The stranger's stream carries only the stranger's events: their own turn is the first it sees.
    const own = await stranger.web.post('/chat', { agent_id: stranger.agentId, text: 'mine' });
    const first = await theirs.next();
    assert.equal(first?.session_id, String(own.headers.location).split('=')[1]);
  } finally {
    stream.close();
    theirs.close();
  }
});

test('a stream sends nothing more once its person has logged out: it ends at the next event', async () => {
  const u = await t.userWithAgent();
  const web = new WebClient(t);
  await web.login(u.email, u.password);
  const stream = await openStream(base, web.cookieHeader());
  try {
    assert.equal(stream.status, 200);
    await web.post('/logout');
    const sent = await t.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text: 'after logout' } });
    assert.equal(sent.statusCode, 200);
    assert.equal(await stream.next(), null, 'the stream ended without the event');
  } finally {
    stream.close();
  }
});

test(`a person holds at most ${MAX_STREAMS_PER_HOLDER} streams on an instance; one closed frees its place`, async () => {
  const { web } = await signedUpWithAgent(t);
  const streams = await Promise.all(Array.from({ length: MAX_STREAMS_PER_HOLDER }, () => openStream(base, web.cookieHeader())));
  try {
    assert.deepEqual(streams.map((s) => s.status), streams.map(() => 200));
    const refused = await openStream(base, web.cookieHeader());
    assert.equal(refused.status, 429);
    // Someone else is not counted with them.
    const other = await openStream(base, (await signedUpWithAgent(t)).web.cookieHeader());
    assert.equal(other.status, 200);
    other.close();
    streams.pop()!.close();
    for (let tries = 0; ; tries++) {
      const again = await openStream(base, web.cookieHeader());
      again.close();
      if (again.status === 200) break;
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
    const stream = await openStream(`http://127.0.0.1:${address.port}`, web.cookieHeader());
    assert.equal(stream.status, 200);
    const started = Date.now();
    const closing = own.close();
    assert.equal(await stream.next(), null, 'the stream ended');
    await closing;
    assert.ok(Date.now() - started < 5_000, `closed in ${Date.now() - started} ms`);
  } finally {
    await own.close();
  }
});
