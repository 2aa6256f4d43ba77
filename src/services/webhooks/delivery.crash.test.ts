import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { runCli } from '../../testing/cli.ts';
import { API, seededDatabase } from '../../testing/harness.ts';
import { postMessage, startServerProcess } from '../../testing/server-process.ts';
import { WebhookReceiver } from '../../testing/webhook-receiver.ts';

/**
 * The real server process killed with SIGKILL while webhook deliveries are under way and more
 * are waiting; started again on the same database, it delivers every event (contract §9.5:
 * pending deliveries survive crashes), those cut off mid-request included.
 */
const EMAIL = 'hooks-crash@example.test';
const seeded = seededDatabase(EMAIL, 2, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', SHUTDOWN_GRACE_MS: '1000' });
let receiver: WebhookReceiver;
after(async () => { await receiver?.close(); });

test('SIGKILL with deliveries in flight and pending: after the restart every event is delivered, verified', { timeout: 150_000 }, async () => {
  receiver = await WebhookReceiver.start();
  // Held answers before the kill: the attempts under way are cut off, the rest wait their turn.
  let holding = true;
  receiver.answer = () => (holding ? { status: 200, delayMs: 60_000 } : { status: 200 });
  const created = await runCli(seeded.env, 'webhooks', 'create', '--email', EMAIL, '--url', receiver.url);
  assert.equal(created.code, 0, created.stderr);
  receiver.secret = created.stdout.split('\n')[1]!;

  let server = await startServerProcess(seeded.env);
  const sessions: string[] = [];
  try {
    for (let i = 0; i < 12; i++) {
      const res = await postMessage(server, seeded.key, { text: `crash-${i}`, agent_id: seeded.agentIds[i % 2] });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      sessions.push(res.body.session_id);
    }
    await receiver.until((got) => got.length >= 1);
  } finally {
    const gone = await server.kill('SIGKILL');
    assert.equal(gone.signal, 'SIGKILL');
  }
  const beforeRestart = new Set(receiver.ids);
  assert.ok(beforeRestart.size < 12, 'deliveries were pending at the kill');
  holding = false;

  server = await startServerProcess(seeded.env);
  try {
    const res = await fetch(`${server.url}${API}/events?limit=200`, { headers: { authorization: `Bearer ${seeded.key}` } });
    const feed = ((await res.json()) as { events: Array<{ id: string; type: string }> }).events;
    assert.equal(feed.length, 12);
    await receiver.until((got) => feed.every((event) => got.some((r) => r.webhookId === event.id && r.verified)), 60_000);
    for (const event of feed) {
      const got = receiver.received.find((r) => r.webhookId === event.id && r.verified)!;
      assert.equal(got.json.id, event.id);
    }
  } finally {
    await server.kill('SIGTERM');
  }
});
