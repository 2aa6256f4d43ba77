import type { Store } from '../store/store.ts';
import type { AgentView } from './agents.ts';
import type { KeyForAuth } from './keys.ts';
import { CachedReads } from './cached-reads.ts';

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
