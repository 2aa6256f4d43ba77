import { Api, GrammyError, HttpError } from 'grammy';
import type { TelegramSettings } from './settings.ts';

/** The most a single 429's retry_after is waited for; a longer one fails the call (it is tried again later). */
const MAX_RETRY_AFTER_S = 300;

const sleep = (ms: number, signal?: AbortSignal): Promise<void> => new Promise((resolve) => {
  const timer = setTimeout(done, ms);
  function done() {
    clearTimeout(timer);
    signal?.removeEventListener('abort', done);
    resolve();
  }
  signal?.addEventListener('abort', done, { once: true });
});

/**
 * The Bot API client (grammY) pointed at TELEGRAM_API_ROOT. A 429 answer is waited out for its
 * `retry_after` and the call made again, so a reply held back by Telegram's flood control still
 * arrives, in order, and nothing is sent sooner than Telegram allows.
 */
export function botApi(settings: TelegramSettings, stopped: AbortSignal): Api {
  const api = new Api(settings.botToken, { apiRoot: settings.apiRoot });
  api.config.use(async (prev, method, payload, signal) => {
    for (;;) {
      const result = await prev(method, payload, signal);
      const retryAfter = result.ok ? undefined : result.parameters?.retry_after;
      if (result.ok || result.error_code !== 429 || retryAfter === undefined || retryAfter > MAX_RETRY_AFTER_S || stopped.aborted) return result;
      await sleep(retryAfter * 1000, stopped);
    }
  });
  return api;
}

/** An error of Telegram's that says the call can never succeed as made (400/403: a message gone, a bot blocked). */
export function isPermanentRefusal(error: unknown): boolean {
  return error instanceof GrammyError && (error.error_code === 400 || error.error_code === 403);
}

/** A failure worth saying without its request (the token is in the URL grammY reports: never logged). */
export function describeBotError(error: unknown): string {
  let text: string;
  if (error instanceof GrammyError) text = `${error.method}: ${error.error_code} ${error.description}`;
  else if (error instanceof HttpError) text = `network: ${(error.error as Error)?.message ?? 'unreachable'}`;
  else text = (error as Error)?.message ?? String(error);
  // A network error may name the URL called, which holds the token.
  return text.replace(/bot\d+:[A-Za-z0-9_-]+/g, 'bot<token>');
}

export { sleep };
