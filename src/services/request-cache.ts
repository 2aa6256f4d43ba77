import type { Store } from '../store/store.ts';
import type { AgentView } from './agents.ts';
import type { KeyForAuth } from './keys.ts';

/**
 * What every API request reads and seldom changes, kept in memory: each API key by its id (an
 * unknown id too, as undefined, so that it costs what a known one does) and the agents each user
 * may message. Kept on SQLite only.
 *
 * The services that write those rows drop what they changed once the write has committed (keys
 * created, revoked, disabled or enabled; agents created; memberships added or removed). What
 * another process commits (the operator CLI revoking a key, say) is seen by
 * `dropIfWrittenElsewhere`, which the server calls at the start of every request: a key that
 * the CLI revoked or disabled is refused on the very next request. (Expiry needs no dropping:
 * it is judged on every request from the expiry kept.)
 *
 * On PostgreSQL nothing is kept: other instances write the same rows, and no look cheaper than
 * the reads themselves would tell this one.
 */
export class RequestCache {
  /** Each API key as authentication needs it, by key id. */
  readonly keys: CachedReads<KeyForAuth | undefined>;
  /** The agents each user may message (every agent of every workspace they belong to), by user id; frozen, as they are shared. */
  readonly agentLists: CachedReads<AgentView[]>;
  private readonly dataVersion: (() => number) | null;
  private seenVersion: number | null = null;

  constructor(store: Pick<Store, 'dataVersion'>, maxEntries = 10_000) {
    this.dataVersion = store.dataVersion;
    const keep = store.dataVersion !== null;
    this.keys = new CachedReads(keep, maxEntries);
    this.agentLists = new CachedReads(keep, maxEntries);
  }

  /** Drops everything if another process (or another connection) has committed since the last look: one `PRAGMA data_version`. */
  dropIfWrittenElsewhere(): void {
    if (!this.dataVersion) return;
    const version = this.dataVersion();
    if (version === this.seenVersion) return;
    this.seenVersion = version;
    this.keys.clear();
    this.agentLists.clear();
  }
}

/**
 * Reads kept by key, at most `maxEntries` of them (the oldest out first: a flood of made-up key
 * ids only costs reads). A read that began before a `forget` or `clear` is given to its caller
 * but not kept: it may hold what that write changed.
 */
export class CachedReads<V> {
  private readonly entries = new Map<string, V>();
  private readonly keep: boolean;
  private readonly maxEntries: number;
  // Moves at every forget and clear: a read begun under an older one is not kept.
  private epoch = 0;

  constructor(keep: boolean, maxEntries: number) {
    this.keep = keep;
    this.maxEntries = maxEntries;
  }

  async get(key: string, read: () => Promise<V>): Promise<V> {
    const held = this.entries.get(key);
    if (held !== undefined || this.entries.has(key)) return held as V;
    const epoch = this.epoch;
    const value = await read();
    if (this.keep && epoch === this.epoch) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, value);
    }
    return value;
  }

  forget(key: string): void {
    this.entries.delete(key);
    this.epoch++;
  }

  clear(): void {
    this.entries.clear();
    this.epoch++;
  }
}
