import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DatabaseAnchoredClock } from './shared-clock.ts';

/** A clock whose machine reads `system` and whose server answers `server` after `roundTripMs`. */
function clockWith(readings: Array<{ roundTripMs: number; serverAheadMs: number }>) {
  let system = 1_000_000;
  let next = 0;
  const clock = new DatabaseAnchoredClock(async () => {
    const { roundTripMs, serverAheadMs } = readings[next++]!;
    system += roundTripMs / 2;
    const server = system + serverAheadMs; // read halfway through the round trip
    system += roundTripMs / 2;
    return server;
  }, () => system);
  return { clock, machine: () => system };
}

test('the shared clock is the machine clock corrected by its measured offset from the database server', async () => {
  const { clock, machine } = clockWith([{ roundTripMs: 4, serverAheadMs: -60_000 }]);
  assert.equal(clock.now(), machine(), 'before any measurement: the machine clock');
  await clock.sync();
  assert.equal(clock.now(), machine() - 60_000);
});

test('a measurement over a slow round trip is not trusted over a recent quick one; the newest quick one wins', async () => {
  const { clock, machine } = clockWith([
    { roundTripMs: 2, serverAheadMs: 5000 },
    { roundTripMs: 400, serverAheadMs: 5000 + 150 }, // a busy moment: the reading lands off the midpoint
    { roundTripMs: 3, serverAheadMs: 5200 }, // the machine's clock was stepped since: this one counts
  ]);
  await clock.sync();
  assert.equal(clock.now() - machine(), 5000);
  await clock.sync();
  assert.equal(clock.now() - machine(), 5000, 'the slow measurement is set aside');
  await clock.sync();
  assert.equal(clock.now() - machine(), 5200);
});
