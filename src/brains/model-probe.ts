import type { ModelSettings } from './model-settings.ts';

/** Where a provider's API is when MODEL_BASE_URL does not say (Anthropic's own). */
export const ANTHROPIC_BASE_URL = 'https://api.anthropic.com/v1';

/** The longest the start-up look at the model waits for an answer. */
const PROBE_WITHIN_MS = 5_000;

/**
 * Whether the model's server answers at all, looked at once at start: any HTTP answer (a 404 or a
 * 401 included: nothing is sent that it could accept) means it can be reached. Null when it
 * answers; else how it failed, named as a failed model call's warning names it. No key is sent.
 */
export async function modelUnreachable(settings: Pick<ModelSettings, 'provider' | 'baseUrl' | 'timeoutMs'>): Promise<'network_error' | 'timeout' | null> {
  const timeout = AbortSignal.timeout(Math.min(PROBE_WITHIN_MS, settings.timeoutMs));
  try {
    const res = await fetch(settings.baseUrl ?? ANTHROPIC_BASE_URL, { method: 'GET', redirect: 'manual', signal: timeout });
    await res.body?.cancel();
    return null;
  } catch {
    return timeout.aborted ? 'timeout' : 'network_error';
  }
}
