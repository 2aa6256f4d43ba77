/**
 * Turn timestamps: RFC 3339 UTC with exactly six fractional digits. Within a session each
 * new ts is max(now, previous + 1 µs), so string order is time order and never repeats.
 */

export const TS_PATTERN = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z$/;

export function nowMicros(): bigint {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000));
}

export function formatTs(micros: bigint): string {
  const millis = Number(micros / 1000n);
  const iso = new Date(millis).toISOString(); // 2026-11-22T12:34:56.789Z
  const fraction = (micros % 1_000_000n).toString().padStart(6, '0');
  return `${iso.slice(0, 19)}.${fraction}Z`;
}

/** Parses a ts of the exact contract format; null for anything else (including impossible dates). */
export function parseTs(ts: string): bigint | null {
  const match = TS_PATTERN.exec(ts);
  if (!match) return null;
  const millis = Date.parse(`${ts.slice(0, 19)}Z`);
  if (Number.isNaN(millis)) return null;
  if (new Date(millis).toISOString().slice(0, 19) !== ts.slice(0, 19)) return null; // 2026-02-30 etc.
  return BigInt(millis) * 1000n + BigInt(match[7]!);
}

export function isValidTs(ts: string): boolean {
  return parseTs(ts) !== null;
}

/** The next ts of a session whose last turn has `previous` (or none). */
export function nextTs(previous: string | null, now: bigint = nowMicros()): string {
  const last = previous ? parseTs(previous) : null;
  const micros = last !== null && last >= now ? last + 1n : now;
  return formatTs(micros);
}
