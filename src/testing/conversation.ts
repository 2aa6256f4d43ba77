import type { LightMyRequestResponse } from 'fastify';
import { API, type TestApp, type TestUser } from './harness.ts';

/** POST /messages as `user`, JSON body, optional extra headers. */
export function send(
  t: TestApp, user: Pick<TestUser, 'auth'>, body: Record<string, unknown>, headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return t.inject({ method: 'POST', url: `${API}/messages`, headers: { ...user.auth, ...headers }, payload: body });
}

/** GET the transcript (optionally with a raw query string). */
export function transcript(t: TestApp, user: Pick<TestUser, 'auth'>, sessionId: string, query = ''): Promise<LightMyRequestResponse> {
  return t.inject({ method: 'GET', url: `${API}/sessions/${sessionId}/messages${query ? `?${query}` : ''}`, headers: user.auth });
}

/** Polls the transcript until `done(body)` holds (bounded: fails after `timeoutMs`). */
export async function pollTranscript(
  t: TestApp, user: Pick<TestUser, 'auth'>, sessionId: string, done: (body: any) => boolean, timeoutMs = 15_000,
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await transcript(t, user, sessionId, 'limit=200');
    const body = res.json();
    if (res.statusCode === 200 && done(body)) return body;
    if (Date.now() > deadline) throw new Error(`transcript never reached the expected state: ${res.body}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
