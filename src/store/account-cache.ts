import { mapMaybe, type MaybePromise } from '../domain/maybe-promise.ts';

/**
 * A bounded copy of what was read by key from the account tables (API keys, agents and who may
 * use them), trusted only while the store's account generation is the one it was read under
 * (see Store.accountGeneration). The generation is taken before the read, so a copy is never
 * older than its tag. With no generation (PostgreSQL) nothing is kept and every call reads.
 * A copy held is given at once, not as a promise (see MaybePromise).
 */
export class AccountReadCache<V> {
  private readonly entries = new Map<string, { generation: number; value: V }>();
  private readonly generation: (() => number) | null;
  private readonly maxEntries: number;

  constructor(generation: (() => number) | null, maxEntries = 10_000) {
    this.generation = generation;
    this.maxEntries = maxEntries;
  }

  get(key: string, read: () => Promise<V>): MaybePromise<V> {
    if (!this.generation) return read();
    const generation = this.generation();
    const held = this.entries.get(key);
    if (held && held.generation === generation) return held.value;
    return mapMaybe(read(), (value) => {
      // Oldest first out: a flood of distinct keys (say, made-up key ids) only costs reads.
      if (!held && this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, { generation, value });
      return value;
    });
  }
}
