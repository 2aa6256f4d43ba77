import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DatabaseAnchoredClock } from './shared-clock.ts';

/**
 * A clock on a machine whose clock reads `machine()`, against a server that answers each reading
 * after `roundTripMs`, `serverAheadMs` ahead of the machine (read halfway through the round trip).
 * `waitForConnectionMs` passes before a connection is in hand.
 */
function clockWith(readings: Array<{ roundTripMs: number; serverAheadMs: number; waitForConnectionMs?: number }>) {
  let system = 1_000_000;
  let next = 0;
  const clock = new DatabaseAnchoredClock(async () => {
    system += readings[next]!.waitForConnectionMs ?? 0;
    return {
      readMs: async () => {
        const { roundTripMs, serverAheadMs } = readings[next++]!;
        system += roundTripMs / 2;
        const server = system + serverAheadMs;
        system += roundTripMs / 2;
        return server;
      },
      release: () => {},
    };
  }, () => system);
  return { clock, machine: () => system, step: (ms: number) => { system += ms; } };
}

test('the shared clock is the machine clock corrected by its measured offset from the database server', async () => {
  const { clock, machine } = clockWith([{ roundTripMs: 4, serverAheadMs: -60_000, waitForConnectionMs: 500 }]);
  assert.equal(clock.now(), machine(), 'before any measurement: the machine clock');
  await clock.sync();
  assert.equal(clock.now(), machine() - 60_000, 'the wait for a connection is not part of the round trip');
});

test('a slow measurement that agrees with the offset in use is set aside; the next quick one counts', async () => {
  const { clock, machine } = clockWith([
    { roundTripMs: 2, serverAheadMs: 5000 },
    { roundTripMs: 400, serverAheadMs: 5000 + 150 }, // a busy moment: the reading lands off the midpoint, within its error
    { roundTripMs: 3, serverAheadMs: 5020 },
  ]);
  await clock.sync();
  assert.equal(clock.now() - machine(), 5000);
  await clock.sync();
  assert.equal(clock.now() - machine(), 5000, 'the slow measurement is set aside');
  await clock.sync();
  assert.equal(clock.now() - machine(), 5020);
});

test('after the machine clock is stepped, the next measurement counts, however slow (a busy server must not keep the old offset)', async () => {
  const { clock, machine, step } = clockWith([
    { roundTripMs: 1, serverAheadMs: 0 },
    { roundTripMs: 1, serverAheadMs: 0 },
    { roundTripMs: 20, serverAheadMs: -60_000 }, // stepped a minute ahead; the server is busy now
  ]);
  await clock.sync();
  await clock.sync();
  const before = clock.now();
  step(60_000);
  assert.equal(clock.now() - before, 60_000, 'until measured, the step shows');
  await clock.sync();
  assert.equal(clock.now() - machine(), -60_000, 'the offset in use lay far outside the slow measurement\'s error');
});
