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

  /** Whether reads are kept at all (not where every read must see other instances' writes). */
  get keeps(): boolean {
    return this.keep;
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
