import type { Api } from 'grammy';

/** Telegram shows "typing…" for 5 s after each chat action: renewed a little sooner. */
const RENEW_MS = 4_000;
/** A turn that runs longer than this is not shown as typing any more (its reply still arrives). */
const LONGEST_MS = 10 * 60_000;

/**
 * "Typing…" in a chat while its session's turn runs: started when a message is accepted and not
 * yet answered, stopped by the session's next turn event (outbound.ts).
 */
export class Typing {
  private readonly api: Api;
  private readonly shown = new Map<string, NodeJS.Timeout>();

  constructor(api: Api) {
    this.api = api;
  }

  start(chatId: string, sessionId: string): void {
    this.stop(sessionId);
    const until = Date.now() + LONGEST_MS;
    const send = () => void this.api.sendChatAction(Number(chatId), 'typing').catch(() => {});
    const timer = setInterval(() => {
      if (Date.now() > until) this.stop(sessionId);
      else send();
    }, RENEW_MS);
    timer.unref();
    this.shown.set(sessionId, timer);
    send();
  }

  stop(sessionId: string): void {
    const timer = this.shown.get(sessionId);
    if (!timer) return;
    clearInterval(timer);
    this.shown.delete(sessionId);
  }

  stopAll(): void {
    for (const sessionId of [...this.shown.keys()]) this.stop(sessionId);
  }
}
