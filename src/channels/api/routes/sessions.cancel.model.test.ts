import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ModelProvider } from '../../../brains/model-settings.ts';
import { send, transcript } from '../../../testing/conversation.ts';
import { lastUserText, startFakeModelProvider, type FakeModelProvider } from '../../../testing/fake-model-provider.ts';
import { cancelSession, eventsOf, sessionStatus } from '../../../testing/feed.ts';
import { startTestApp, type TestApp } from '../../../testing/harness.ts';
import { unique } from '../../../testing/missions.ts';

/** §9.4 against a model provider (a local server speaking its protocol): a cancel aborts the model call under way. */
for (const protocol of ['openai-compatible', 'anthropic'] as const satisfies readonly ModelProvider[]) {
  describe(`cancel of a running model call (${protocol})`, () => {
    let provider: FakeModelProvider;
    let t: TestApp;
    const warnings: unknown[] = [];
    before(async () => {
      provider = await startFakeModelProvider();
      t = await startTestApp(
        // A 10 min timeout: only the cancel can end the call within the test.
        { waitCeilingMs: 20_000, model: { provider: protocol, name: 'test-model', baseUrl: provider.baseUrl, apiKey: 'sk-test', timeoutMs: 600_000, systemPrompt: null, maxOutputTokens: 1024 } },
        { logWarning: (fields) => warnings.push(fields) },
      );
    });
    after(async () => {
      await t.close();
      await provider.close();
    });

    test('the provider sees the request given up, the waiting send is answered Cancelled., and the agent answers the next message', async () => {
      const stalled = unique('Think about it forever');
      provider.script = (request) => (lastUserText(request) === stalled ? { hang: true } : { text: `Re: ${lastUserText(request)}` });
      const u = await t.userWithAgent();
      const waiting = send(t, u, { text: stalled });
      for (const until = Date.now() + 10_000; provider.requests.length === 0;) {
        assert.ok(Date.now() < until, 'the model is called');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const [session] = (await t.runtime.services.conversations.listSessionsPage(u.id)).sessions;
      await sessionStatus(t, u, session!.session_id, 'processing');

      assert.deepEqual((await cancelSession(t, u, session!.session_id)).json(), { session_id: session!.session_id, cancelled: 1 });
      const answered = await waiting;
      assert.equal(answered.statusCode, 200);
      assert.deepEqual(
        { status: answered.json().status, reply: answered.json().reply, error: answered.json().error },
        { status: 'completed', reply: 'Cancelled.', error: 'cancelled' },
      );
      const deadline = Date.now() + 10_000; // bounded: without the abort the call would wait for its 10 min timeout
      while (!provider.requests[0]!.abandoned && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(provider.requests[0]!.abandoned, true, 'the provider saw the call given up');

      const next = unique('And now?');
      const after = await send(t, u, { text: next, agent_id: u.agentId });
      assert.equal(after.json().reply, `Re: ${next}`);
      assert.deepEqual((await transcript(t, u, session!.session_id)).json().messages.map((m: { text: string; error?: string }) => [m.text, m.error ?? null]),
        [[stalled, null], ['Cancelled.', 'cancelled']]);
      assert.deepEqual(await eventsOf(t, u, session!.session_id), [['turn.cancelled', { ts: answered.json().message_ts }]]);
      assert.deepEqual(warnings, [], 'a cancelled call is no failed model call');
    });
  });
}
