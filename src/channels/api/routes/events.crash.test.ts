import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isStream, openEventStream, type EventStream } from '../../../testing/event-stream.ts';
import { openStore } from '../../../store/store.ts';
import { API, seededDatabase } from '../../../testing/harness.ts';
import { postMessage, startServerProcess, type ServerProcess } from '../../../testing/server-process.ts';

/**
 * The real server process killed with SIGKILL while an SSE client reads its event stream and
 * events are being written, then started again on the same database: the client reconnects
 * with the last id it saw and gets every event exactly once (contract §9.3), those of the
 * turns cut off mid-run and run again after the restart included.
 */

const seeded = seededDatabase('stream-crash@example.test', 4, { WAIT_CEILING_MS: '5000', JOB_LEASE_MS: '1500', SHUTDOWN_GRACE_MS: '3000' });

const post = (server: ServerProcess, body: unknown, headers?: Record<string, string>) => postMessage(server, seeded.key, body, headers);

async function get(server: ServerProcess, path: string): Promise<any> {
  const res = await fetch(`${server.url}${API}${path}`, { headers: { authorization: `Bearer ${seeded.key}` } });
  assert.equal(res.status, 200, path);
  return res.json();
}

/** The whole JSON feed, page after page. */
async function feedFrom(server: ServerProcess): Promise<any[]> {
  const events: any[] = [];
  for (;;) {
    const page = await get(server, `/events?limit=200${events.length > 0 ? `&after=${events.at(-1).id}` : ''}`);
    events.push(...page.events);
    if (!page.has_more) return events;
  }
}

async function streamFrom(server: ServerProcess, lastEventId?: string): Promise<EventStream> {
  const opened = await openEventStream(server.url, seeded.key, lastEventId === undefined ? {} : { lastEventId });
  assert.ok(isStream(opened), `not a stream: ${opened.response.status}`);
  return opened;
}

/** Until no job is queued or running (a message the kill cut off in its answer may have been taken too). */
async function untilAllDone(timeoutMs = 40_000): Promise<void> {
  const store = await openStore(seeded.database.url, seeded.database.pgSchema ? { pgSchema: seeded.database.pgSchema } : {});
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const open = await store.db.selectFrom('jobs').select(['id', 'status']).where('status', 'in', ['queued', 'running']).execute();
      if (open.length === 0) return;
      if (Date.now() > deadline) throw new Error(`jobs never finished: ${JSON.stringify(open)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await store.close();
  }
}

test('SIGKILL while a stream is read and events are written; after the restart the client resumes with Last-Event-ID and gets every event once', { timeout: 120_000 }, async () => {
  const [a0, a1, a2, busy] = seeded.agentIds as [string, string, string, string];
  /** Every accepted message: its session and the reply whose turn.completed must be in the feed once. */
  const accepted: { sessionId: string; reply: string }[] = [];
  const seen: any[] = [];
  const sessions: string[] = [];
  const operations: string[] = [];

  let server = await startServerProcess(seeded.env);
  let stream = await streamFrom(server);
  let writing: Promise<void> = Promise.resolve();
  try {
    for (const [i, agentId] of [a0, a1, a2].entries()) {
      const hello = await post(server, { text: `hello-${i}`, agent_id: agentId });
      assert.equal(hello.status, 200, JSON.stringify(hello.body));
      sessions.push(hello.body.session_id);
      accepted.push({ sessionId: hello.body.session_id, reply: `You said: hello-${i}` });
      const drafted = await post(server, { text: `!action email crash-${i}`, session_id: hello.body.session_id });
      assert.equal(drafted.status, 200, JSON.stringify(drafted.body));
      operations.push(/\b(op_[A-Za-z0-9]+)/.exec(drafted.body.reply)![1]!);
    }
    // Mid-work at the kill: a long turn in each session, and one queued behind it.
    for (const [i, sessionId] of sessions.entries()) {
      for (const [text, reply] of [[`!sleep 2500 mid-${i}`, `You said: mid-${i}`], [`!sleep 100 queued-${i}`, `You said: queued-${i}`]]) {
        const res = await post(server, { text, session_id: sessionId }, { prefer: 'wait=0' });
        assert.equal(res.status, 202, JSON.stringify(res.body));
        accepted.push({ sessionId, reply: reply! });
      }
    }
    await stream.untilEvents(9); // per session: a reply, and the action's reply and action.pending
    // Writing still, as the process dies: messages to a fourth agent, each in a session of its own.
    writing = (async () => {
      for (let n = 0; n < 40; n++) {
        const res = await post(server, { text: `burst-${n}`, agent_id: busy }, { prefer: 'wait=0' }).catch(() => null);
        if (!res) return; // the process is gone: this one may or may not have been taken
        assert.ok(res.status === 200 || res.status === 202, JSON.stringify(res.body));
        accepted.push({ sessionId: res.body.session_id, reply: `You said: burst-${n}` });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    const statuses = await Promise.all(sessions.map(async (id) => (await get(server, `/sessions/${id}/messages`)).status));
    assert.deepEqual(statuses, ['processing', 'processing', 'processing'], 'the long turns are mid-run at the kill');
  } finally {
    const gone = await server.kill('SIGKILL');
    assert.equal(gone.signal, 'SIGKILL');
  }
  await writing;
  const cut = await stream.ended;
  assert.equal(cut.clean, false, 'the stream was cut, not ended');
  seen.push(...stream.events.map((e) => e.json));
  assert.ok(seen.length >= 9);

  server = await startServerProcess(seeded.env);
  try {
    stream = await streamFrom(server, seen.at(-1).id);
    // After the restart: the actions approved, and one more message per session.
    for (const [i, operationId] of operations.entries()) {
      const res = await fetch(`${server.url}${API}/actions/decisions`, {
        method: 'POST', headers: { authorization: `Bearer ${seeded.key}`, 'content-type': 'application/json' },
        body: JSON.stringify([{ operation_id: operationId, decision: 'approve' }]),
      });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as any).results[0].outcome, 'approved');
      accepted.push({ sessionId: sessions[i]!, reply: `Done: crash-${i}` });
      const after = await post(server, { text: `after the restart ${i}`, session_id: sessions[i] }, { prefer: 'wait=0' });
      assert.ok(after.status === 200 || after.status === 202, JSON.stringify(after.body));
      accepted.push({ sessionId: sessions[i]!, reply: `You said: after the restart ${i}` });
    }
    await untilAllDone();
    const feed = await feedFrom(server);
    await stream.untilEvents(feed.length - seen.length, 20_000);
    await new Promise((r) => setTimeout(r, 200)); // nothing more follows
    seen.push(...stream.events.map((e) => e.json));

    assert.deepEqual(seen.map((e) => e.id), feed.map((e) => e.id), 'every event once, in the feed\'s order');
    assert.deepEqual(seen, feed);
    for (const { sessionId, reply } of accepted) {
      const replies = feed.filter((e) => e.type === 'turn.completed' && e.session_id === sessionId && e.data.text === reply);
      assert.equal(replies.length, 1, `${reply} in ${sessionId}: ${JSON.stringify(replies)}`);
    }
    assert.equal(feed.filter((e) => e.type === 'turn.failed').length, 0, 'no turn failed');
  } finally {
    stream.close();
    await server.kill('SIGTERM');
  }
});
