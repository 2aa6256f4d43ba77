import { z } from 'zod';
import { effectiveKeyStatus, generateApiKey, hashSecret, parseBearer, secretMatches, type KeyStatus } from '../domain/api-key.ts';
import { parseOrThrow, Problem } from '../domain/problems.ts';
import type { ApiKey } from '../store/schema.ts';
import { prepared } from '../store/prepared.ts';
import type { Store } from '../store/store.ts';
import { localIsoNow } from './clock.ts';
import { isoNowOf } from '../store/shared-clock.ts';
import type { CachedReads } from './cached-reads.ts';

export interface KeysDeps {
  store: Store;
  /** Shared with the services that write what it keeps (see RequestCache). */
  keyCache: CachedReads<KeyForAuth | undefined>;
  defaultRateLimitPerMinute: number;
  maxRateLimitPerMinute: number;
  /** Milliseconds clock that paces last_used_at writes (default Date.now; tests move it by hand). */
  now?: () => number;
}

export function createKeyInputSchema(maxRateLimit: number) {
  return z.object({
    label: z.string().trim().min(1, 'is required').max(100, 'must be at most 100 characters').regex(/^\P{Cc}*$/u, 'must not contain control characters such as tabs or line breaks'),
    rate_limit: z.number().int('must be a whole number').min(1, `must be from 1 to ${maxRateLimit} requests a minute`)
      .max(maxRateLimit, `must be from 1 to ${maxRateLimit} requests a minute`).optional(),
    expires_in_days: z.number().int('must be a whole number').min(1, 'must be from 1 to 3650 days').max(3650, 'must be from 1 to 3650 days').optional(),
  });
}

export type CreateKeyInput = z.input<ReturnType<typeof createKeyInputSchema>>;

/** What a key looks like to its owner: never the secret or its digest. */
export interface KeyView {
  key_id: string;
  label: string;
  status: KeyStatus;
  rate_limit: number;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

export interface AuthenticatedKey {
  keyId: string;
  userId: string;
  rateLimit: number;
}

/** What authenticating a request needs of its key: whose it is, whether it works now, its limit. */
const KEY_FOR_AUTH_COLUMNS = ['id', 'user_id', 'secret_hash', 'status', 'expires_at', 'rate_limit'] as const satisfies ReadonlyArray<keyof ApiKey>;
export type KeyForAuth = Pick<ApiKey, (typeof KEY_FOR_AUTH_COLUMNS)[number]>;

// On every authenticated request whose key is not kept: built once (see store/prepared.ts).
const findKeyForAuth = prepared((db, keyId: string) => db.selectFrom('api_keys').select(KEY_FOR_AUTH_COLUMNS).where('id', '=', keyId));

// last_used_at is written at most this often per key (per process).
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

export class KeysService {
  private readonly lastUsedWrites = new Map<string, number>();
  private readonly pendingWrites = new Set<Promise<unknown>>();
  private readonly deps: KeysDeps;

  constructor(deps: KeysDeps) {
    this.deps = deps;
  }

  async create(userId: string, input: CreateKeyInput): Promise<{ key: KeyView; token: string }> {
    const parsed = parseOrThrow(createKeyInputSchema(this.deps.maxRateLimitPerMinute), input);
    const { keyId, secret, token } = generateApiKey();
    const now = this.sharedNow(); // its expiry is judged by every instance
    const row = {
      id: keyId,
      user_id: userId,
      label: parsed.label,
      secret_hash: hashSecret(secret),
      rate_limit: parsed.rate_limit ?? this.deps.defaultRateLimitPerMinute,
      status: 'active' as const,
      expires_at: parsed.expires_in_days ? new Date(now.getTime() + parsed.expires_in_days * 86_400_000).toISOString() : null,
      created_at: now.toISOString(),
      revoked_at: null,
      last_used_at: null,
    };
    await this.deps.store.db.transaction().execute(async (trx) => {
      await trx.insertInto('api_keys').values(row).execute();
      await trx.insertInto('audit_log').values({
        at: row.created_at, actor_user_id: userId, action: 'key.created', subject_id: keyId,
        details: JSON.stringify({ label: row.label, rate_limit: row.rate_limit, expires_at: row.expires_at }),
      }).execute();
    });
    this.deps.keyCache.forget(keyId); // kept as unknown, should a request have named it
    return { key: this.toView({ ...row }), token };
  }

  /** The keys this user created, newest first. */
  async list(userId: string): Promise<KeyView[]> {
    const rows = await this.deps.store.db.selectFrom('api_keys')
      .select(KEY_VIEW_COLUMNS)
      .where('user_id', '=', userId).orderBy('created_at', 'desc').orderBy('id').execute();
    return rows.map((row) => this.toView(row));
  }

  /** One of the user's own keys; another user's key is not found. */
  async find(userId: string, keyId: string): Promise<KeyView | undefined> {
    const row = await this.deps.store.db.selectFrom('api_keys')
      .select(KEY_VIEW_COLUMNS)
      .where('id', '=', keyId).where('user_id', '=', userId).executeTakeFirst();
    return row && this.toView(row);
  }

  /** How many of the user's keys work now: active, and not past their expiry (as effectiveKeyStatus). */
  async countActive(userId: string): Promise<number> {
    const { count } = await this.deps.store.db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('count'))
      .where('user_id', '=', userId).where('status', '=', 'active')
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', isoNowOf(this.deps.store.clock))])).executeTakeFirstOrThrow();
    return Number(count);
  }

  /** Revokes one of the user's own keys; another user's key is "not found". Permanent. */
  async revoke(userId: string, keyId: string): Promise<void> {
    const now = localIsoNow();
    await this.deps.store.db.transaction().execute(async (trx) => {
      const key = await trx.selectFrom('api_keys').select(['id', 'status']).where('id', '=', keyId).where('user_id', '=', userId).executeTakeFirst();
      if (!key) throw new Problem('not_found', 'No such key.');
      if (key.status === 'revoked') return;
      await trx.updateTable('api_keys').set({ status: 'revoked', revoked_at: now }).where('id', '=', keyId).execute();
      await trx.insertInto('audit_log').values({ at: now, actor_user_id: userId, action: 'key.revoked', subject_id: keyId, details: null }).execute();
    });
    this.deps.keyCache.forget(keyId);
  }

  /** Operator switch active ⇄ inactive; a revoked or expired key stays as it is. */
  async setEnabled(keyId: string, enabled: boolean, actorUserId: string | null = null): Promise<KeyStatus> {
    const status = await this.deps.store.db.transaction().execute(async (trx) => {
      const key = await trx.selectFrom('api_keys').select(['id', 'status', 'expires_at']).where('id', '=', keyId).executeTakeFirst();
      if (!key) throw new Problem('not_found', 'No such key.');
      const current = effectiveKeyStatus(key, this.sharedNow());
      // Contract §7: a revoked or expired key stays so; the command succeeds and changes nothing.
      if (current === 'revoked' || current === 'expired') return current;
      const next = enabled ? 'active' : 'inactive';
      if (current !== next) {
        await trx.updateTable('api_keys').set({ status: next }).where('id', '=', keyId).execute();
        await trx.insertInto('audit_log').values({
          at: localIsoNow(), actor_user_id: actorUserId, action: enabled ? 'key.enabled' : 'key.disabled', subject_id: keyId, details: null,
        }).execute();
      }
      return next;
    });
    this.deps.keyCache.forget(keyId);
    return status;
  }

  /**
   * Resolves an Authorization header to an active key, or null for every kind of failure.
   * Always one lookup (kept in the RequestCache) and one constant-time digest comparison,
   * whatever the cause.
   */
  async authenticate(authorization: string | undefined): Promise<AuthenticatedKey | null> {
    const parsed = parseBearer(authorization);
    if (!parsed) return null;
    const key = await this.deps.keyCache.get(parsed.keyId, async () => (await findKeyForAuth(this.deps.store.db, parsed.keyId))[0]);
    const matches = secretMatches(parsed.secret, key?.secret_hash ?? null);
    if (!key || !matches || effectiveKeyStatus(key, this.sharedNow()) !== 'active') return null;
    this.noteUsed(key.id);
    return { keyId: key.id, userId: key.user_id, rateLimit: this.effectiveLimit(key.rate_limit) };
  }

  /**
   * A key's limit as it applies now: never over the server's maximum, also for a key made while
   * an operator had raised it (for a load test, say) and has lowered it since.
   */
  private effectiveLimit(stored: number): number {
    return Math.min(stored, this.deps.maxRateLimitPerMinute);
  }

  /** Now, as every instance on the store tells it: a key expires at the same moment everywhere. */
  private sharedNow(): Date {
    return new Date(this.deps.store.clock.now());
  }

  /** Writes last_used_at at most about once a minute per key, off the request's path. */
  private noteUsed(keyId: string): void {
    const now = (this.deps.now ?? Date.now)();
    const last = this.lastUsedWrites.get(keyId);
    if (last !== undefined && now - last < LAST_USED_WRITE_INTERVAL_MS) return;
    this.lastUsedWrites.set(keyId, now);
    if (this.lastUsedWrites.size > 100_000) this.lastUsedWrites.clear();
    const write = this.deps.store.db.updateTable('api_keys').set({ last_used_at: new Date(now).toISOString() })
      .where('id', '=', keyId).execute()
      .catch(() => this.lastUsedWrites.delete(keyId))
      .finally(() => this.pendingWrites.delete(write));
    this.pendingWrites.add(write);
  }

  /** Resolves once every last_used_at write started so far has finished (before closing the store). */
  async settled(): Promise<void> {
    await Promise.all([...this.pendingWrites]);
  }

  /** A key as its owner sees it, with the limit it runs at now. */
  private toView(row: Pick<ApiKey, (typeof KEY_VIEW_COLUMNS)[number]>): KeyView {
    return {
      key_id: row.id,
      label: row.label,
      status: effectiveKeyStatus(row, this.sharedNow()),
      rate_limit: this.effectiveLimit(row.rate_limit),
      created_at: row.created_at,
      last_used_at: row.last_used_at,
      expires_at: row.expires_at,
      revoked_at: row.revoked_at,
    };
  }

  async auditTrail(keyId: string) {
    return this.deps.store.db.selectFrom('audit_log').selectAll().where('subject_id', '=', keyId).orderBy('id').execute();
  }
}

// What a KeyView is made of (list and find read the same).
const KEY_VIEW_COLUMNS = ['id', 'label', 'status', 'rate_limit', 'created_at', 'last_used_at', 'expires_at', 'revoked_at'] as const satisfies ReadonlyArray<keyof ApiKey>;

