/**
 * The time a record is stamped with (created, decided, updated): for reading, never compared
 * across instances. A time that another instance compares (a lease, a window, an expiry) comes
 * from the store's shared clock instead (store/shared-clock.ts).
 */
export const isoNow = (): string => new Date().toISOString();
