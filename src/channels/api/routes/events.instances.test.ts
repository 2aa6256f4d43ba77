import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { isStream, openEventStream, type EventStream } from '../../../testing/event-stream.ts';
import { allEvents } from '../../../testing/feed.ts';
import { API, freshDatabase, startTestApp, TEST_DB, type TestApp, type TestDatabase, type TestUser } from '../../../testing/harness.ts';
import { answerOne, askQuestion, decideOne, draftAction, send, unique } from '../../../testing/missions.ts';

/**
 * Two app instances over one PostgreSQL schema, each listening on a loopback port: what one
 * writes wakes the reads held on the other (long-polls, streams), every reader of a feed
 * written through both sees each event once and in order, and a cancel through one stops
 * the turn the other runs (contract §9.1, §9.3, §9.4).
 */

type Owner = TestUser & { agentId: string };
const auth = (user: Pick<TestUser, 'key'>) => ({ authorization: `Bearer ${user.key}` });
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('several instances', { skip: TEST_DB !== 'postgres' && 'several instances need PostgreSQL (the PostgreSQL pass)' }, () => {
  let database: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  const urls = new Map<TestApp, string>();
  before(async () => {
    database = await freshDatabase();
    a = await startTestApp({ instanceId: 'instance-a' }, { database });
    b = await startTestApp({ instanceId: 'instance-b' }, { database });
    for (const app of [a, b]) {
      await app.app.listen({ port: 0, host: '127.0.0.1' });
      urls.set(app, `http://127.0.0.1:${(app.app.server.address() as AddressInfo).port}`);
    }
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await database?.drop();
  });

  async function stream(on: TestApp, user: Pick<TestUser, 'key'>, lastEventId?: string): Promise<EventStream> {
    const opened = await openEventStream(urls.get(on)!, user.key, lastEventId === undefined ? {} : { lastEventId });
    assert.ok(isStream(opened), `not a stream: ${opened.response.status}`);
    return opened;
  }

  /** Until no job of the shared database is queued or running. */
  async function allDone(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await a.runtime.store.db.selectFrom('jobs').select('id').where('status', 'in', ['queued', 'running']).execute()).length > 0) {
      assert.ok(Date.now() < deadline, 'jobs still open');
      await pause(50);
    }
  }

  /** Until the session's job for `text` runs, on whichever instance: its lease owner. */
  async function runningOwner(sessionId: string, timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = await a.runtime.store.db.selectFrom('jobs').select(['status', 'lease_owner'])
        .where('session_id', '=', sessionId).where('status', '=', 'running').executeTakeFirst();
      if (job) return job.lease_owner!;
      assert.ok(Date.now() < deadline, `no job of ${sessionId} running`);
      await pause(20);
    }
  }

  /** `request` started; `write` run once it has been held a while; how long after `write` the request was answered. */
  async function heldUntil<T>(request: Promise<T>, write: () => Promise<unknown>): Promise<{ answer: T; afterWriteMs: number }> {
    let answeredEarly = false;
    void request.then(() => { answeredEarly = true; }, () => {});
    await pause(400);
    assert.equal(answeredEarly, false, 'the request is held until something is written');
    await write();
    const wrote = Date.now();
    const answer = await request;
    return { answer, afterWriteMs: Date.now() - wrote };
  }

  test('a transcript long-poll held on A answers promptly when B writes a turn: the message B took, then the reply B\'s runner wrote', { timeout: 30_000 }, async () => {
    const u = await a.userWithAgent();
    const first = await send(a, u, unique('first'), { agentId: u.agentId });
    const lastTs = (await a.inject({ method: 'GET', url: `${API}/sessions/${first.sessionId}/messages`, headers: u.auth })).json().messages.at(-1).ts;
    const poll = (afterTs: string) => a.inject({
      method: 'GET', url: `${API}/sessions/${first.sessionId}/messages?after=${encodeURIComponent(afterTs)}`, headers: { ...u.auth, prefer: 'wait=20' },
    });

    const text = unique('written by B');
    const userTurn = await heldUntil(poll(lastTs), async () => {
      const res = await b.inject({ method: 'POST', url: `${API}/messages`, headers: { ...u.auth, prefer: 'wait=0' }, payload: { text: `!sleep 1000 ${text}`, session_id: first.sessionId } });
      assert.equal(res.statusCode, 202, res.body);
    });
    assert.ok(userTurn.afterWriteMs < 1500, `answered ${userTurn.afterWriteMs} ms after the write`);
    assert.equal(userTurn.answer.statusCode, 200);
    assert.equal(userTurn.answer.headers['preference-applied'], 'wait=20');
    assert.deepEqual(userTurn.answer.json().messages.map((m: any) => [m.role, m.text]), [['user', `!sleep 1000 ${text}`]]);

    assert.equal(await runningOwner(first.sessionId), 'instance-b', 'B took the message, and runs it');
    const replyPoll = poll(userTurn.answer.json().messages[0].ts);
    const started = Date.now();
    const reply = await replyPoll;
    assert.deepEqual(reply.json().messages.map((m: any) => [m.role, m.text]), [['agent', `You said: ${text}`]]);
    assert.ok(Date.now() - started < 1000 + 1500, `the reply came ${Date.now() - started} ms after the poll began (the turn sleeps 1000 ms)`);
  });

  test('an /events long-poll held on A answers promptly with the event B writes', { timeout: 30_000 }, async () => {
    const u = await a.userWithAgent();
    const drafted = await draftAction(a, u, 'email', unique('settled through B'), { agentId: u.agentId });
    const [last] = (await allEvents(a, u)).slice(-1);
    const held = a.inject({ method: 'GET', url: `${API}/events?after=${last!.id}`, headers: { ...u.auth, prefer: 'wait=20' } });
    const { answer, afterWriteMs } = await heldUntil(held, () => decideOne(b, u, { operation_id: drafted.operationId, decision: 'reject' }));
    assert.ok(afterWriteMs < 1500, `answered ${afterWriteMs} ms after the write`);
    assert.equal(answer.statusCode, 200);
    assert.equal(answer.headers['preference-applied'], 'wait=20');
    assert.deepEqual(answer.json().events.map((e: any) => [e.type, e.data.operation_id]), [['action.settled', drafted.operationId]]);
  });

  test('an SSE stream on A sees what B writes, as the feed has it', { timeout: 30_000 }, async () => {
    const u = await a.userWithAgent();
    const events = await stream(a, u);
    try {
      const drafted = await draftAction(b, u, 'email', unique('drafted through B'), { agentId: u.agentId });
      await decideOne(b, u, { operation_id: drafted.operationId, decision: 'approve' });
      const streamed = await events.untilEvents(4); // the reply, action.pending; action.settled, the Done turn
      assert.deepEqual(streamed.map((e) => e.json), await allEvents(b, u));
      assert.deepEqual(streamed.map((e) => e.event).sort(), ['action.pending', 'action.settled', 'turn.completed', 'turn.completed']);
    } finally {
      events.close();
    }
  });

  /**
   * One reader of one person's feed: pages of the JSON feed long-polled on one instance, or an
   * SSE stream on one instance that hangs up now and then and resumes with Last-Event-ID.
   */
  function jsonReader(on: TestApp, user: Pick<TestUser, 'key'>, stop: AbortSignal) {
    const seen: any[] = [];
    const done = (async () => {
      while (!stop.aborted) {
        const after = seen.length > 0 ? `?after=${seen.at(-1).id}` : '';
        const res = await on.inject({ method: 'GET', url: `${API}/events${after}`, headers: { ...auth(user), prefer: 'wait=1' } });
        assert.equal(res.statusCode, 200, res.body);
        seen.push(...res.json().events);
      }
    })();
    return { seen, done };
  }

  function streamReader(on: TestApp, user: Pick<TestUser, 'key'>, stop: AbortSignal) {
    const seen: any[] = [];
    const done = (async () => {
      let reconnects = 0;
      while (!stop.aborted) {
        const events = await stream(on, user, seen.at(-1)?.id);
        await Promise.race([events.untilEvents(5 + (reconnects++ % 7), 2000).catch(() => {}), new Promise((r) => stop.addEventListener('abort', r))]);
        events.close();
        await events.ended;
        seen.push(...events.events.map((e) => e.json));
      }
      return reconnects;
    })();
    return { seen, done };
  }

  test('many writers through both instances at once (sessions, actions, questions, two people): every reader, JSON or stream, on either instance, sees each event once, in the feed\'s order', { timeout: 120_000 }, async () => {
    const people: Owner[] = [await a.userWithAgent({ plan: 'pro' }), await a.userWithAgent({ plan: 'pro' })];
    const [ann, bob] = people as [Owner, Owner];
    // Each may ask the other (a question put to someone else is in both feeds).
    await a.runtime.services.accounts.addMember({ workspaceId: await a.runtime.services.accounts.personalWorkspaceId(ann.id), email: bob.email, role: 'member' });
    await a.runtime.services.accounts.addMember({ workspaceId: await a.runtime.services.accounts.personalWorkspaceId(bob.id), email: ann.email, role: 'member' });
    const agents = new Map<Owner, string[]>();
    for (const person of people) {
      const more = [];
      for (let i = 0; i < 2; i++) more.push((await a.runtime.services.agents.create(person.id, { agent_name: `Agent ${i}` })).agent_id);
      agents.set(person, [person.agentId, ...more]);
    }

    // Readers from before the first write: each person's whole feed is theirs to see.
    const stop = new AbortController();
    const readers = [
      { person: ann, ...jsonReader(a, ann, stop.signal) }, { person: ann, ...streamReader(b, ann, stop.signal) },
      { person: bob, ...jsonReader(b, bob, stop.signal) }, { person: bob, ...streamReader(a, bob, stop.signal) },
    ];
    await pause(200);

    const instances = [a, b];
    const lanes = people.flatMap((person) => agents.get(person)!.map((agentId, i) => ({ person, agentId, i })));
    try {
      await Promise.all(lanes.map(async ({ person, agentId, i }) => {
        const other = person === ann ? bob : ann;
        const [via, settleVia] = i % 2 === 0 ? [a, b] : [b, a];
        const { sessionId } = await send(via, person, unique('opens'), { agentId });
        for (let round = 0; round < 3; round++) {
          const drafted = await draftAction(via, person, 'email', unique(`round ${round}`), sessionId);
          await decideOne(settleVia, person, { operation_id: drafted.operationId, decision: round % 2 === 0 ? 'approve' : 'reject' });
          const asked = await askQuestion(settleVia, person, 'text', unique(`a question of round ${round}?`), { target: sessionId });
          assert.equal((await answerOne(via, person, asked.requestId, `answer ${round}`)).accepted, true);
          // Put to the other person, who answers through the other instance.
          const put = await askQuestion(via, person, 'text', unique(`for ${other.email} in round ${round}?`), { target: sessionId, of: other.email });
          assert.equal((await answerOne(instances[round % 2]!, other, put.requestId, `from the other ${round}`)).accepted, true);
        }
      }));
      await allDone();
    } catch (error) {
      stop.abort();
      throw error;
    }
    const finals = new Map<Owner, any[]>([[ann, await allEvents(a, ann)], [bob, await allEvents(b, bob)]]);
    // The readers catch up, then stop.
    const deadline = Date.now() + 30_000;
    while (readers.some((r) => r.seen.length < finals.get(r.person)!.length) && Date.now() < deadline) await pause(50);
    await pause(300);
    stop.abort();
    const reconnects = await Promise.all(readers.map((r) => r.done));

    for (const person of people) {
      const final = finals.get(person)!;
      assert.ok(final.length >= 6 * 3 * 3, `${person.email}: ${final.length} events`);
      assert.deepEqual((await allEvents(person === ann ? b : a, person)).map((e) => e.id), final.map((e) => e.id), 'both instances give one feed');
    }
    for (const [n, reader] of readers.entries()) {
      const final = finals.get(reader.person)!;
      assert.deepEqual(reader.seen.map((e) => e.id), final.map((e) => e.id), `reader ${n}: every event once, in order`);
      assert.deepEqual(reader.seen, final);
    }
    assert.ok(reconnects.filter((r) => typeof r === 'number').every((r) => r >= 3), `the streams came back: ${reconnects}`);
  });

  test('a cancel through A stops the turn B runs: B writes no reply, and the send waiting on B is answered Cancelled.', { timeout: 30_000 }, async () => {
    const u = await a.userWithAgent();
    const opening = await send(b, u, unique('opens'), { agentId: u.agentId });
    const text = unique('never said');
    const waiting = b.inject({ method: 'POST', url: `${API}/messages`, headers: u.auth, payload: { text: `!sleep 3000 ${text}`, session_id: opening.sessionId } });
    assert.equal(await runningOwner(opening.sessionId), 'instance-b');
    const sent = Date.now();

    const cancel = await a.inject({ method: 'POST', url: `${API}/sessions/${opening.sessionId}/cancel`, headers: u.auth });
    assert.equal(cancel.statusCode, 200, cancel.body);
    assert.deepEqual(cancel.json(), { session_id: opening.sessionId, cancelled: 1 });

    const answer = await waiting;
    assert.equal(answer.statusCode, 200, answer.body);
    assert.equal(answer.json().status, 'completed');
    assert.equal(answer.json().reply, 'Cancelled.');
    assert.equal(answer.json().error, 'cancelled');
    // B's run itself stops (its sleep is cut short), not only its outcome refused.
    const deadline = Date.now() + 1500;
    while (b.runtime.engine.running > 0) {
      assert.ok(Date.now() < deadline, 'B still runs the cancelled turn');
      await pause(20);
    }
    assert.ok(Date.now() - sent < 2500, 'before the sleep would have ended');

    await pause(Math.max(0, sent + 3500 - Date.now())); // past the end of the sleep
    const messages = (await a.inject({ method: 'GET', url: `${API}/sessions/${opening.sessionId}/messages`, headers: u.auth })).json().messages;
    assert.deepEqual(messages.slice(2).map((m: any) => [m.role, m.text, m.error]), [['user', `!sleep 3000 ${text}`, undefined], ['agent', 'Cancelled.', 'cancelled']]);
    const feed = await allEvents(a, u);
    assert.deepEqual(feed.map((e) => e.type), ['turn.completed', 'turn.cancelled']);
  });
});
