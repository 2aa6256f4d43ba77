import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { API, type TestApp, type TestUser } from './harness.ts';

/**
 * Helpers for the tests of the outbound side (contract §9.1–§9.4), all through the real HTTP
 * API: read the event feed, cancel a session, and wait until reads are held.
 */
type Auth = Pick<TestUser, 'auth'>;

/** An event as GET /events gives it (§9.3). */
export interface FeedEventBody {
  id: string;
  type: string;
  created_at: string;
  session_id: string;
  agent_id: string;
  data: Record<string, unknown>;
}

/** GET /events as `user` (optionally with a raw query string and extra headers). */
export function readEvents(t: TestApp, user: Auth, query = '', headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.inject({ method: 'GET', url: `${API}/events${query ? `?${query}` : ''}`, headers: { ...user.auth, ...headers } });
}

/** Every event in the user's feed now (optionally narrowed by a raw query string), oldest first, read page by page. */
export async function allEvents(t: TestApp, user: Auth, query = ''): Promise<FeedEventBody[]> {
  const events: FeedEventBody[] = [];
  for (let after = ''; ;) {
    const res = await readEvents(t, user, [query, 'limit=200', after && `after=${after}`].filter(Boolean).join('&'));
    assert.equal(res.statusCode, 200, res.body);
    const page = res.json();
    events.push(...page.events);
    if (!page.has_more) return events;
    after = page.events.at(-1).id;
  }
}

/** The user's events of one session, as `[type, data]` pairs: what a test compares. */
export async function eventsOf(t: TestApp, user: Auth, sessionId: string): Promise<Array<[string, Record<string, unknown>]>> {
  return (await allEvents(t, user, `session_id=${sessionId}`)).map((event) => [event.type, event.data]);
}

/** POST /sessions/{id}/cancel as `user`. */
export function cancelSession(t: TestApp, user: Auth, sessionId: string): Promise<LightMyRequestResponse> {
  return t.inject({ method: 'POST', url: `${API}/sessions/${sessionId}/cancel`, headers: user.auth });
}

/**
 * Waits until `count` reads are held on this instance (a long-poll of the transcript or the
 * feed), so that what a test writes next must wake them. Bounded: fails instead of hanging.
 */
export async function heldReads(t: TestApp, count: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (t.runtime.engine.wakeups.held === count) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.fail(`expected ${count} held reads, found ${t.runtime.engine.wakeups.held}`);
}

/** Waits until the session's transcript says `status` (e.g. its turn is running). Bounded. */
export async function sessionStatus(t: TestApp, user: Auth, sessionId: string, status: string): Promise<void> {
  let last = '';
  for (let i = 0; i < 400; i++) {
    const res = await t.inject({ method: 'GET', url: `${API}/sessions/${sessionId}/messages?limit=1`, headers: user.auth });
    last = res.json().status;
    if (last === status) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.fail(`session ${sessionId} never became ${status} (last: ${last})`);
}

/** Milliseconds `work` took, with its result. */
export async function timed<T>(work: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work;
  return { value, ms: performance.now() - started };
}
