import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { isStream, openEventStream, type EventStream, type Refused } from '../../../testing/event-stream.ts';
import { allEvents } from '../../../testing/feed.ts';
import { API, seededDatabase, startTestApp, type TestApp, type TestUser } from '../../../testing/harness.ts';
import { answerOne, askQuestion, decideOne, draftAction, queueDrained, send, unique } from '../../../testing/missions.ts';
import { postMessage, startServerProcess } from '../../../testing/server-process.ts';
import { MAX_STREAMS_PER_HOLDER as MAX_STREAMS_PER_KEY } from '../../event-streams.ts';

/**
 * `GET /events` as a Server-Sent Events stream (contract §9.3) over real HTTP: the test app
 * listening on a loopback port, read by a client that parses text/event-stream itself.
 */

let t: TestApp;
let baseUrl: string;
before(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
after(() => t.close());

const proUser = () => t.userWithAgent({ plan: 'pro' });

async function stream(key: string, options: { lastEventId?: string; query?: string } = {}): Promise<EventStream> {
  const opened = await openEventStream(baseUrl, key, options);
  assert.ok(isStream(opened), `not a stream: ${opened.response.status} ${JSON.stringify((opened as Refused).body)}`);
  assert.equal(opened.response.status, 200);
  return opened;
}

async function refused(key: string, options: { lastEventId?: string; query?: string } = {}): Promise<Refused> {
  const opened = await openEventStream(baseUrl, key, options);
  if (isStream(opened)) {
    opened.close();
    assert.fail('a stream was opened');
  }
  assert.match(String(opened.response.headers.get('content-type')), /^application\/problem\+json\b/);
  return opened;
}

test('each event is an id/event/data frame whose data is the event as the JSON feed has it; without a cursor the stream starts with the next new event', async () => {
  const u = await proUser();
  await send(t, u, unique('before the stream'), { agentId: u.agentId });
  const opening = Date.now();
  const events = await stream(u.key);
  try {
    // With nothing to send yet, the answer's head still comes at once, not with the first heartbeat (10 s).
    assert.ok(Date.now() - opening < 5000, `the stream took ${Date.now() - opening} ms to open`);
    assert.equal(events.response.headers.get('content-type'), 'text/event-stream');
    assert.equal(events.response.headers.get('cache-control'), 'no-cache');
    const { sessionId } = await send(t, u, unique('while streaming'), { agentId: u.agentId });
    const [first] = await events.untilEvents(1);
    const feed = await allEvents(t, u);
    assert.equal(feed.length, 2);
    assert.deepEqual(first!.json, feed[1]!, 'the event written after the stream opened, not the one before');
    assert.equal(first!.id, feed[1]!.id);
    assert.equal(first!.event, 'turn.completed');
    assert.equal(first!.json.session_id, sessionId);
  } finally {
    events.close();
  }
});

test('a stream starts after Last-Event-ID, else after `after`; Last-Event-ID wins over `after`', async () => {
  const u = await proUser();
  for (let i = 0; i < 3; i++) await send(t, u, unique(`turn ${i}`), { agentId: u.agentId });
  const ids = (await allEvents(t, u)).map((e) => e.id);
  assert.equal(ids.length, 3);
  const cases = [
    { options: { lastEventId: ids[0] }, expected: ids.slice(1) },
    { options: { query: `?after=${ids[1]}` }, expected: ids.slice(2) },
    { options: { lastEventId: ids[1], query: `?after=${ids[0]}` }, expected: ids.slice(2) },
  ];
  for (const { options, expected } of cases) {
    const events = await stream(u.key, options);
    try {
      await events.untilEvents(expected.length);
      await new Promise((r) => setTimeout(r, 100)); // nothing more follows
      assert.deepEqual(events.events.map((e) => e.id), expected, JSON.stringify(options));
    } finally {
      events.close();
    }
  }
});

/** About 50 events from two sessions at once: turns, actions approved and rejected, questions answered. */
async function produceEvents(u: TestUser & { agentId: string }, secondAgentId: string): Promise<void> {
  await Promise.all([u.agentId, secondAgentId].map(async (agentId, lane) => {
    // A pause between steps, so that the reader comes and goes while they are written.
    const pause = () => new Promise((r) => setTimeout(r, 30));
    const { sessionId } = await send(t, u, unique(`lane ${lane} opens`), { agentId });
    for (let round = 0; round < 3; round++) {
      const drafted = await draftAction(t, u, 'email', unique(`lane ${lane} round ${round}`), sessionId);
      await pause();
      await decideOne(t, u, { operation_id: drafted.operationId, decision: round % 2 === 0 ? 'approve' : 'reject' });
      await pause();
      const asked = await askQuestion(t, u, 'text', unique(`lane ${lane} asks in round ${round}?`), { target: sessionId });
      await pause();
      assert.equal((await answerOne(t, u, asked.requestId, `answer ${round}`)).accepted, true);
      await pause();
      await send(t, u, unique(`lane ${lane} plain ${round}`), sessionId);
    }
  }));
}

test('a client that hangs up mid-stream and reconnects with the last id it saw, many times while events are written, sees every event once, in the feed\'s order', { timeout: 120_000 }, async () => {
  const u = await proUser();
  const second = await t.runtime.services.agents.create(u.id, { agent_name: 'Second' });
  const first = await stream(u.key); // before anything is written: the whole feed is the stream's
  let finalFeed: any[] | null = null;
  const producing = produceEvents(u, second.agent_id).then(() => queueDrained(t)).then(() => allEvents(t, u)).then((feed) => { finalFeed = feed; });
  producing.catch(() => {}); // awaited below; a failure ends the reading first

  const seen: any[] = [];
  let reconnects = 0;
  let reconnectsWhileWriting = 0;
  let current = first;
  const deadline = Date.now() + 90_000;
  try {
    for (;;) {
      // Read a few events (1 to 5), hang up, and come back after a pause in which more may be written.
      const want = 1 + (reconnects % 5);
      await Promise.race([current.untilEvents(want, seen.length === 0 ? 20_000 : 1500).catch(() => {}), producing]);
      current.close();
      await current.ended;
      for (const frame of current.events) {
        assert.equal(frame.id, frame.json.id);
        assert.equal(frame.event, frame.json.type);
        seen.push(frame.json);
      }
      const feed = finalFeed as any[] | null;
      if (feed && seen.at(-1)?.id === feed.at(-1)?.id) break;
      if (!feed) reconnectsWhileWriting++;
      assert.ok(Date.now() < deadline, `the stream never caught up: saw ${seen.length}, feed ${feed?.length}`);
      assert.ok(seen.length > 0, 'the first stream got no event');
      await new Promise((r) => setTimeout(r, reconnects % 3 === 0 ? 150 : 10));
      const last = seen.at(-1).id;
      // Mostly Last-Event-ID (what an EventSource sends); sometimes `after`; once both.
      const options = reconnects % 4 === 3 ? { query: `?after=${last}` }
        : reconnects === 5 ? { lastEventId: last, query: `?after=${seen[0].id}` } : { lastEventId: last };
      current = await stream(u.key, options);
      reconnects++;
    }
  } finally {
    current.close();
    await producing;
  }
  const feed = finalFeed!;
  assert.ok(feed.length >= 45, `about 50 events written: ${feed.length}`);
  // How many of the reconnects fall while events are still written depends on the machine's pace; a few suffice.
  assert.ok(reconnectsWhileWriting >= 3, `reconnected ${reconnectsWhileWriting} times while events were written`);
  assert.deepEqual(seen.map((e) => e.id), feed.map((e) => e.id), 'every event once, in order');
  assert.deepEqual(seen, feed);
  const types = new Set(feed.map((e) => e.type));
  for (const type of ['turn.completed', 'action.pending', 'action.settled', 'question.opened', 'question.answered']) assert.ok(types.has(type), type);
});

test('a quiet stream gets a comment line (the heartbeat) and no event', { timeout: 20_000 }, async () => {
  const u = await proUser();
  const events = await stream(u.key);
  try {
    // The heartbeat comes every 10 s.
    const comment = await events.untilComment(12_000);
    assert.equal(comment, 'heartbeat');
    assert.deepEqual(events.events, []);
  } finally {
    events.close();
  }
});

test(`a key's ${MAX_STREAMS_PER_KEY + 1}th open stream gets 429 too_many_streams; closing one frees a slot; another key is not held back`, { timeout: 30_000 }, async () => {
  const u = await proUser();
  const other = await t.runtime.services.keys.create(u.id, { label: 'another', rate_limit: 10_000 });
  const open: EventStream[] = [];
  try {
    for (let i = 0; i < MAX_STREAMS_PER_KEY; i++) open.push(await stream(u.key));
    const eleventh = await refused(u.key);
    assert.equal(eleventh.response.status, 429);
    assert.equal(eleventh.body.code, 'too_many_streams');
    assert.equal(eleventh.body.status, 429);

    open.push(await stream(other.token), await stream(other.token));

    open.shift()!.close();
    // The server frees the slot once it sees the hang-up.
    const until = Date.now() + 5000;
    let reopened: EventStream | Refused;
    do {
      reopened = await openEventStream(baseUrl, u.key);
      if (isStream(reopened)) break;
      assert.equal(reopened.response.status, 429);
      await new Promise((r) => setTimeout(r, 50));
    } while (Date.now() < until);
    assert.ok(isStream(reopened), 'a slot was freed');
    open.push(reopened);
    assert.equal((await refused(u.key)).response.status, 429, 'and only one');

    // The streams still work: an event reaches every one of them.
    await send(t, u, unique('to every stream'), { agentId: u.agentId });
    await Promise.all(open.map((s) => s.untilEvents(1)));
  } finally {
    for (const s of open) s.close();
  }
});

test('Last-Event-ID or `after` older than the oldest event kept: 410 cursor_expired; not one of the caller\'s events: 422', async () => {
  const u = await proUser();
  const stranger = await proUser();
  await send(t, u, unique('soon expired'), { agentId: u.agentId });
  const [expired] = await allEvents(t, u);
  // Past the retention: everything recorded so far is purged (by the housekeeping's own call).
  await t.runtime.services.feed.purgeExpired(Date.now() + t.config.eventRetentionMs + 60_000);
  await send(t, u, unique('kept'), { agentId: u.agentId });
  await send(t, stranger, unique('not yours'), { agentId: stranger.agentId });

  for (const options of [{ lastEventId: expired!.id }, { query: `?after=${expired!.id}` }]) {
    const gone = await refused(u.key, options);
    assert.equal(gone.response.status, 410, JSON.stringify(options));
    assert.equal(gone.body.code, 'cursor_expired');
  }
  const [kept] = await allEvents(t, u);
  const [strangers] = await allEvents(t, stranger);
  for (const lastEventId of ['nonsense', 'evt_0', 'evt_999999999', strangers!.id]) {
    const bad = await refused(u.key, { lastEventId });
    assert.equal(bad.response.status, 422, lastEventId);
    assert.equal(bad.body.code, 'validation_failed');
  }
  // The id of an event kept is a good cursor.
  (await stream(u.key, { lastEventId: kept!.id })).close();
});

test('a stream is refused for what the JSON feed refuses: limit outside 1–200 (422), a malformed cursor (422) before a session that is not the caller\'s (404)', async () => {
  const u = await proUser();
  for (const query of ['?limit=0', '?limit=201', '?limit=abc']) {
    const bad = await refused(u.key, { query });
    assert.equal(bad.response.status, 422, query);
    assert.deepEqual(bad.body.errors.map((e: { path: string }) => e.path), ['limit'], query);
  }
  const missing = 'ses_0000000000000000000000';
  for (const options of [{ query: `?after=nonsense&session_id=${missing}` }, { lastEventId: 'nonsense', query: `?session_id=${missing}` }]) {
    const bad = await refused(u.key, options);
    assert.equal(bad.response.status, 422, JSON.stringify(options));
    assert.equal(bad.body.code, 'validation_failed');
  }
  const notFound = await refused(u.key, { query: `?session_id=${missing}` });
  assert.equal(notFound.response.status, 404);
  assert.equal(notFound.body.code, 'session_not_found');
  (await stream(u.key, { query: '?limit=200' })).close();
});

test('a stream counts once against the rate limit, whatever it carries', { timeout: 30_000 }, async () => {
  const u = await t.userWithAgent({ plan: 'pro', rateLimit: 5 });
  // Events are written with another key, so that only the stream counts against this one.
  const writer = await t.runtime.services.keys.create(u.id, { label: 'writer', rate_limit: 10_000 });
  const events = await stream(u.key);
  try {
    assert.match(String(events.response.headers.get('ratelimit')), /^"key";r=4;t=\d+$/);
    for (let i = 0; i < 6; i++) await send(t, { auth: { authorization: `Bearer ${writer.token}` } }, unique(`event ${i}`), { agentId: u.agentId });
    await events.untilEvents(6);
    const res = await t.inject({ method: 'GET', url: `${API}/agents`, headers: u.auth });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers.ratelimit), /^"key";r=3;t=\d+$/, 'the stream and this request');
  } finally {
    events.close();
  }
});

describe('a real server process', () => {
  const seeded = seededDatabase('stream-shutdown@example.test', 1, { WAIT_CEILING_MS: '5000', SHUTDOWN_GRACE_MS: '3000' });

  test('a stream ends cleanly when the server shuts down, and the access log has its line', { timeout: 60_000 }, async () => {
    const server = await startServerProcess(seeded.env);
    try {
      const opened = await openEventStream(server.url, seeded.key);
      assert.ok(isStream(opened));
      const sent = await postMessage(server, seeded.key, { text: 'one event', agent_id: seeded.agentIds[0] });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      await opened.untilEvents(1);
      const exit = await server.kill('SIGTERM');
      assert.equal(exit.code, 0);
      assert.deepEqual(await opened.ended, { clean: true }, 'the end of the response, not a reset');
      const lines = server.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
      const access = lines.filter((l) => l.url === `${API}/events`);
      assert.equal(access.length, 1, JSON.stringify(access));
      assert.equal(access[0].status, 200);
      assert.equal(access[0].method, 'GET');
    } finally {
      await server.kill('SIGKILL');
    }
  });
});
