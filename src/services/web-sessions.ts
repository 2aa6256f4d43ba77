import { hash } from 'node:crypto';
import { randomBase62 } from '../domain/ids.ts';
import type { Plan } from '../store/schema.ts';
import { instanceSecret } from '../store/repos/instance-secrets.ts';
import type { Store } from '../store/store.ts';

/**
 * Web-app sessions (the browser channel's login state). The cookie carries a random token; the
 * store keeps only its SHA-256, so a database read does not hand out live sessions.
 */
export interface WebSessionsDeps {
  store: Store;
  /** A session unused for this long is over. */
  idleMinutes: number;
  /** A session is over this long after login, however busy (default 7 days). */
  absoluteHours?: number;
}

export interface WebSession {
  id: string; // SHA-256 hex of the cookie token
  userId: string;
  email: string;
  plan: Plan;
  csrfToken: string;
}

// last_seen_at is written at most this often per session, not on every page view.
const TOUCH_INTERVAL_MS = 60_000;

export const sessionDigest = (token: string): string => hash('sha256', token, 'hex');

export class WebSessionsService {
  private readonly deps: WebSessionsDeps;

  constructor(deps: WebSessionsDeps) {
    this.deps = deps;
  }

  /**
   * The key the web app seals values with on their way to the next page (a new API key's
   * secret): one per deployment, so the next page may be served by another instance.
   */
  sealingKey(): Promise<Buffer> {
    return instanceSecret(this.deps.store.db, 'web.sealing-key');
  }

  private get idleMs(): number {
    return this.deps.idleMinutes * 60_000;
  }

  /** A new session for the user; returns the cookie token (shown to nobody else). */
  async create(userId: string, now = new Date(this.deps.store.clock.now())): Promise<{ token: string; csrfToken: string }> {
    const token = randomBase62(43); // ~256 bits
    const csrfToken = randomBase62(32);
    const at = now.toISOString();
    await this.deps.store.db.insertInto('web_sessions').values({
      id: sessionDigest(token),
      user_id: userId,
      csrf_token: csrfToken,
      created_at: at,
      last_seen_at: at,
      expires_at: new Date(now.getTime() + (this.deps.absoluteHours ?? 24 * 7) * 3_600_000).toISOString(),
    }).execute();
    return { token, csrfToken };
  }

  /**
   * The live session for a cookie token, or null (unknown, idle too long, or past its end;
   * an expired row is deleted on sight). Refreshes last_seen_at about once a minute.
   */
  async resolve(token: string | undefined, now = new Date(this.deps.store.clock.now())): Promise<WebSession | null> {
    if (!token || token.length > 128 || !/^[A-Za-z0-9]+$/.test(token)) return null;
    const id = sessionDigest(token);
    const row = await this.deps.store.db.selectFrom('web_sessions')
      .innerJoin('users', 'users.id', 'web_sessions.user_id')
      .select(['web_sessions.id', 'web_sessions.user_id', 'web_sessions.csrf_token', 'web_sessions.last_seen_at',
        'web_sessions.expires_at', 'users.email', 'users.plan'])
      .where('web_sessions.id', '=', id).executeTakeFirst();
    if (!row) return null;
    const nowMs = now.getTime();
    if (nowMs - Date.parse(row.last_seen_at) > this.idleMs || nowMs >= Date.parse(row.expires_at)) {
      await this.destroy(token);
      return null;
    }
    if (nowMs - Date.parse(row.last_seen_at) > TOUCH_INTERVAL_MS) {
      await this.deps.store.db.updateTable('web_sessions').set({ last_seen_at: now.toISOString() }).where('id', '=', id).execute();
    }
    return { id: row.id, userId: row.user_id, email: row.email, plan: row.plan, csrfToken: row.csrf_token };
  }

  async destroy(token: string): Promise<void> {
    await this.deps.store.db.deleteFrom('web_sessions').where('id', '=', sessionDigest(token)).execute();
  }

  /** Removes sessions that are over (idle or past their end); returns how many. */
  async sweep(now = new Date(this.deps.store.clock.now())): Promise<number> {
    const idleBefore = new Date(now.getTime() - this.idleMs).toISOString();
    const result = await this.deps.store.db.deleteFrom('web_sessions')
      .where((eb) => eb.or([eb('last_seen_at', '<', idleBefore), eb('expires_at', '<=', now.toISOString())]))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Test and operator aid: moves a session's last activity (e.g. to prove the idle timeout). */
  async setLastSeen(token: string, at: Date): Promise<void> {
    await this.deps.store.db.updateTable('web_sessions').set({ last_seen_at: at.toISOString() })
      .where('id', '=', sessionDigest(token)).execute();
  }
}
