/**
 * Preloaded into a server process (`NODE_OPTIONS=--import <this file>`) to stand in for a machine
 * whose clock is off by CLOCK_SKEW_MS: `Date` (now, and `new Date()`) is shifted; timers and
 * `performance.now()` are not, as on such a machine.
 */
const skewMs = Number(process.env.CLOCK_SKEW_MS ?? 0);
const SystemDate = Date;

class SkewedDate extends SystemDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(SystemDate.now() + skewMs);
    else super(...(args as [string]));
  }

  static override now(): number {
    return SystemDate.now() + skewMs;
  }
}

globalThis.Date = SkewedDate as DateConstructor;
