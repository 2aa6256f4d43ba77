/** Wall-clock helpers shared by services; one place so tests can reason about time. */
export const isoNow = (): string => new Date().toISOString();
export const isoIn = (ms: number): string => new Date(Date.now() + ms).toISOString();
