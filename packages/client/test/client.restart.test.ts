import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentChannel, type FeedEvent } from '../src/index.ts';
import { seededDatabase } from '../../../src/testing/harness.ts';
import { startServerProcess } from '../../../src/testing/server-process.ts';
import { startFaultyProxy } from './proxy.ts';

/**
 * The events iterator across a real restart: the server process is killed while the client
 * reads its stream, events are written while the client is away, and a new process is started
 * on the same database (behind the same address). The iterator reconnects by itself with
 * Last-Event-ID and yields exactly the feed, each event once and in order.
 */
const seeded = seededDatabase('client-restart@example.test', 1);

test('events() survives a server restart without losing or repeating an event', { timeout: 90_000 }, async () => {
  let server = await startServerProcess(seeded.env, 60_000);
  const proxy = await startFaultyProxy(server.url);
  const client = new AgentChannel({ baseUrl: proxy.url, apiKey: seeded.key });
  const reconnects: unknown[] = [];
  const stop = new AbortController();
  const seen: FeedEvent[] = [];
  const arrived = new Set<() => void>();
  const reading = (async () => {
    for await (const event of client.events({ after: undefined, signal: stop.signal, onReconnect: (cause) => reconnects.push(cause) })) {
      seen.push(event);
      for (const wake of arrived) wake();
    }
  })().catch((error: unknown) => { if (!stop.signal.aborted) throw error; });
  const untilSeen = (count: number) => new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${seen.length} of ${count} events: ${JSON.stringify(seen)}`)), 30_000);
    const look = () => { if (seen.length >= count) { clearTimeout(timer); arrived.delete(look); resolve(); } };
    arrived.add(look);
    look();
  });
  try {
    await new Promise((resolve) => setTimeout(resolve, 300)); // the stream is open
    const first = await client.sendAndWait('before the restart');
    await client.sendAndWait('!action email Send the report', { sessionId: first.session_id });
    await untilSeen(3); // turn.completed, action.pending, turn.completed

    await server.kill('SIGKILL');
    server = await startServerProcess(seeded.env, 60_000);
    // Written while the client is still reconnecting to a server it cannot reach yet.
    const direct = new AgentChannel({ baseUrl: server.url, apiKey: seeded.key });
    await direct.actions.approve((await direct.actions.list())[0]!.operation_id, { strict: true });
    await direct.sendAndWait('while away', { sessionId: first.session_id });
    proxy.target = server.url;
    await client.sendAndWait('after the restart', { sessionId: first.session_id });

    const feed: FeedEvent[] = [];
    for (let page = await direct.eventsPage({ limit: 200 }); ; page = await direct.eventsPage({ limit: 200, after: feed.at(-1)!.id })) {
      feed.push(...page.events);
      if (!page.has_more) break;
    }
    await untilSeen(feed.length);
    await new Promise((resolve) => setTimeout(resolve, 300)); // nothing more follows
    assert.ok(reconnects.length >= 1, 'the stream was cut and resumed');
    assert.deepEqual(seen.map((e) => e.id), feed.map((e) => e.id), 'every event once, in order');
    assert.deepEqual(seen, feed);
    const replies = feed.filter((e) => e.type === 'turn.completed').map((e) => String(e.data.text).replace(/\(operation_id op_\w+\)/, '(…)'));
    assert.deepEqual(replies, ['You said: before the restart', 'I need your permission to run "email": Send the report (…). Approve or reject it.',
      'Done: Send the report', 'You said: while away', 'You said: after the restart']);
  } finally {
    stop.abort();
    await reading;
    await proxy.close();
    await server.kill('SIGTERM');
  }
});
