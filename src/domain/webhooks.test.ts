import assert from 'node:assert/strict';
import { test } from 'node:test';
import { retryPauseMs } from './webhooks.ts';

const SCHEDULE = [5_000, 30_000, 7_200_000];

test('a retry\'s pause is at least the scheduled one and at most 20 % longer, whatever the draw', () => {
  for (const [retry, base] of SCHEDULE.entries()) {
    assert.equal(retryPauseMs(SCHEDULE, retry, () => 0), base, 'the shortest draw is the schedule itself');
    assert.equal(retryPauseMs(SCHEDULE, retry, () => 0.5), Math.round(base * 1.1));
    assert.equal(retryPauseMs(SCHEDULE, retry, () => 0.999_999_999), Math.round(base * 1.2), 'the longest draw adds a fifth');
    for (let draw = 0; draw < 200; draw++) {
      const pause = retryPauseMs(SCHEDULE, retry)!;
      assert.ok(pause >= base && pause <= base * 1.2, `${pause} ms for a pause of ${base} ms`);
    }
  }
});

test('a pause of a millisecond stays one, and past the schedule there is no retry', () => {
  assert.equal(retryPauseMs([1], 0, () => 0.999), 1);
  assert.equal(retryPauseMs(SCHEDULE, SCHEDULE.length), null);
});
